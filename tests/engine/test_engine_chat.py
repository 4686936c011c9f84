"""``POST /v1/chat/completions`` over real HTTP on loopback, driven by the ``openai``
package: a small transformers checkpoint with Llama-2-chat's chat template (prompt ids held
to transformers' own ``apply_chat_template``), whole and streamed; the plain template of the
byte tokenizer through the PD router; bad messages refused with 400."""

from __future__ import annotations

import threading

import openai
import pytest

from engine.core.llm import LLMEngine
from engine.core.sequence import SamplingParams
from engine.knobs import EngineKnobs
from engine.serving.http import EngineHTTPServer
from engine.serving.info import startup_info
from engine.serving.worker import Worker
from engine.serving.worker import make_worker_handler
from tests.engine.conftest import write_hf_checkpoint

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

# meta-llama/Llama-2-7b-chat-hf's tokenizer_config.json chat_template (bos_token,
# raise_exception, system folding), as published.
LLAMA2_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% else %}"
    "{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
    "{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}"
    "{% endif %}{% endfor %}"
)
MESSAGES = [{"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hello, who are you?"},
            {"role": "assistant", "content": "A small model."},
            {"role": "user", "content": "Say more."}]
# The last message as OpenAI's text parts: the engine joins them (transformers does not).
PARTS = [*MESSAGES[:-1], {"role": "user", "content": [{"type": "text", "text": "Say more."}]}]


def _write_tokenizer(path) -> transformers.PreTrainedTokenizerFast:
    """A byte-level BPE trained here, saved by transformers with the template."""
    from tokenizers import Tokenizer
    from tokenizers import decoders
    from tokenizers import models
    from tokenizers import pre_tokenizers
    from tokenizers import trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=290, special_tokens=["<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(["Hello, who are you? A small model. Say more. Be brief."] * 20,
                            trainer)
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>",
                                                eos_token="</s>")
    fast.chat_template = LLAMA2_TEMPLATE
    fast.save_pretrained(path)
    return transformers.AutoTokenizer.from_pretrained(path)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("chat_ckpt")
    write_hf_checkpoint(path, "llama", vocab_size=300, hidden_size=64, intermediate_size=160,
                        num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2,
                        max_position_embeddings=256)
    return path, _write_tokenizer(path)


def _serve(eng: LLMEngine, name: str):
    eng.start()
    worker = Worker(eng, "both", startup_info("both", name, eng.knobs))
    httpd = EngineHTTPServer(("127.0.0.1", 0), make_worker_handler(worker))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"


@pytest.fixture(scope="module")
def served(checkpoint):
    path, hf_tok = checkpoint
    eng = LLMEngine(EngineKnobs(num_pages=64, num_threads=1, dtype="float32"),
                    model_dir=str(path))
    httpd, url = _serve(eng, "ckpt")
    yield url, eng, hf_tok
    httpd.shutdown()
    eng.stop()


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=60)


def _greedy(eng: LLMEngine, prompt: list[int], n: int) -> list[int]:
    """The reference tokens, through the served engine's own loop: offline ``generate``
    on an engine whose loop runs steps its scheduler from two threads at once (it failed
    under load with ``running.remove``: a race of the test's making, not the server's)."""
    params = SamplingParams(n, ignore_eos=True)
    if getattr(eng, "_thread", None) is None:  # not serving: offline is the engine's own
        return eng.generate([prompt], params)[0].output_ids
    return eng.submit(eng.make_sequence(prompt, params)).result(timeout=120).output_ids


def test_chat_prompt_is_transformers_apply_chat_template(served):
    url, eng, hf_tok = served
    want = list(hf_tok.apply_chat_template(MESSAGES, add_generation_prompt=True,
                                           tokenize=True, return_dict=False))
    assert hf_tok.decode(want).startswith("<s>[INST] <<SYS>>")
    assert eng.tokenizer.apply_chat_template(MESSAGES) == list(want)
    r = client(url).chat.completions.create(
        model="ckpt", messages=PARTS, max_tokens=6, temperature=0,
        extra_body={"ignore_eos": True, "return_token_ids": True})
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-")
    assert r.usage.prompt_tokens == len(want) and r.usage.completion_tokens == 6
    ids = r.choices[0].model_extra["token_ids"]
    assert ids == _greedy(eng, list(want), 6)
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content == hf_tok.decode(ids)
    assert r.choices[0].finish_reason == "length"


def test_chat_streams_deltas_with_role_first_and_usage_last(served):
    url, eng, hf_tok = served
    chunks = list(client(url).chat.completions.create(
        model="ckpt", messages=MESSAGES, max_completion_tokens=12, temperature=0,
        stream=True, stream_options={"include_usage": True},
        extra_body={"ignore_eos": True}))
    content = [ch for ch in chunks if ch.choices]
    # A loaded machine may coalesce several steps' tokens into one chunk: at least one.
    assert content and all(ch.object == "chat.completion.chunk" for ch in chunks)
    assert content[0].choices[0].delta.role == "assistant"
    assert all(ch.choices[0].delta.role is None for ch in content[1:])
    assert content[-1].choices[0].finish_reason == "length"
    whole = client(url).chat.completions.create(
        model="ckpt", messages=MESSAGES, max_tokens=12, temperature=0,
        extra_body={"ignore_eos": True})
    assert "".join(ch.choices[0].delta.content or "" for ch in content) == \
        whole.choices[0].message.content
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 12
    assert all(ch.usage is None for ch in content)


@pytest.mark.parametrize("kwargs,match", [
    ({"messages": []}, "'messages' must be a non-empty list"),
    ({"messages": [{"content": "hi"}]}, r"messages\[0\].role must be a non-empty string"),
    ({"messages": [{"role": "user", "content": 3}]}, r"messages\[0\].content must be"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
     r"messages\[0\].content\[0\] of type 'image_url' is not supported"),
    ({"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]},
     "Conversation roles must alternate"),
    ({"messages": MESSAGES, "tools": [{"type": "function", "function": {"name": "f"}}]},
     "'tools'=.* is not supported"),
    ({"messages": MESSAGES, "max_tokens": 3, "max_completion_tokens": 4}, "differ"),
])
def test_bad_chat_requests_get_400_naming_the_problem(served, kwargs, match):
    with pytest.raises(openai.BadRequestError, match=match):
        client(served[0]).chat.completions.create(model="ckpt", **kwargs)


def test_chat_without_max_tokens_runs_to_eos_or_context_end(served):
    url, eng, _ = served
    r = client(url).chat.completions.create(model="ckpt", messages=MESSAGES[1:2],
                                            temperature=0, extra_body={"ignore_eos": True})
    assert r.usage.total_tokens == eng.cfg.max_position_embeddings
    assert r.choices[0].finish_reason == "length"


@pytest.fixture(scope="module")
def cluster(module_servers):
    return module_servers.pd_cluster({})


def test_chat_through_the_router_uses_the_plain_template(cluster):
    _, _, router = cluster
    messages = [{"role": "user", "content": "hi"}]
    prompt = [256, *b"user: hi\nassistant:"]
    eng = LLMEngine(EngineKnobs(num_pages=64, num_threads=1), preset="tiny")
    want = _greedy(eng, prompt, 20)
    c = client(router)
    whole = c.chat.completions.create(model="tiny", messages=messages, max_tokens=20,
                                      temperature=0, extra_body={"ignore_eos": True,
                                                                 "return_token_ids": True})
    assert whole.choices[0].model_extra["token_ids"] == want
    assert whole.usage.prompt_tokens == len(prompt)
    chunks = list(c.chat.completions.create(
        model="tiny", messages=messages, max_tokens=20, temperature=0, stream=True,
        extra_body={"ignore_eos": True, "return_token_ids": True}))
    assert [t for ch in chunks for t in ch.choices[0].model_extra["token_ids"]] == want
    assert chunks[0].choices[0].delta.role == "assistant"
    with pytest.raises(openai.BadRequestError, match="messages"):
        c.chat.completions.create(model="tiny", messages=[{"role": "user"}])
