# Shaped like vllm/entrypoints/common/cli_args.py of vLLM 0.34.0 (abridged).
import argparse
import json
import ssl
from dataclasses import field
from typing import Any, Literal

from vllm.engine.arg_utils import AsyncEngineArgs, optional_type


@config
class BaseFrontendArgs:
    """Base arguments for the OpenAI-compatible frontend server."""

    lora_modules: list[LoRAModulePath] | None = None
    """LoRA modules configurations in either 'name=path' format or JSON format."""
    chat_template_content_format: ChatTemplateContentFormatOption = "auto"
    """The format to render message content within a chat template."""
    enable_auto_tool_choice: bool = False
    """Enable auto tool choice for supported models."""
    enable_log_deltas: bool = True
    """If set to False, output deltas will not be logged."""
    default_chat_template_kwargs: dict[str, Any] | None = None
    """Default keyword arguments to pass to the chat template renderer."""

    @classmethod
    def _customize_cli_kwargs(cls, frontend_kwargs):
        frontend_kwargs["default_chat_template_kwargs"]["type"] = json.loads
        frontend_kwargs["lora_modules"]["type"] = optional_type(str)
        return frontend_kwargs


@config
class FrontendArgs(BaseFrontendArgs):
    """Arguments for the OpenAI-compatible frontend server."""

    host: str | None = None
    """Host name."""
    port: int = 8000
    """Port number."""
    uvicorn_log_level: Literal[
        "critical", "error", "warning", "info", "debug", "trace"
    ] = "info"
    """Log level for uvicorn."""
    allowed_origins: list[str] = field(default_factory=list)
    """Allowed origins."""
    allowed_methods: list[str] = field(default_factory=lambda: ["*"])
    """Allowed methods."""
    api_key: list[str] | None = None
    """If provided, the server will require one of these keys to be presented in
    the header."""
    ssl_cert_reqs: int = int(ssl.CERT_NONE)
    """Whether client certificate is required (see stdlib ssl module's)."""
    middleware: list[str] = field(default_factory=lambda: [])
    """Additional ASGI middleware to apply to the app."""

    @classmethod
    def _customize_cli_kwargs(cls, frontend_kwargs):
        frontend_kwargs = super()._customize_cli_kwargs(frontend_kwargs)
        frontend_kwargs["allowed_origins"]["type"] = json.loads
        frontend_kwargs["allowed_methods"]["type"] = json.loads
        del frontend_kwargs["allowed_origins"]["nargs"]
        del frontend_kwargs["allowed_methods"]["nargs"]
        frontend_kwargs["middleware"]["action"] = "append"
        frontend_kwargs["middleware"]["type"] = str
        if "nargs" in frontend_kwargs["middleware"]:
            del frontend_kwargs["middleware"]["nargs"]
        frontend_kwargs["middleware"]["default"] = []
        return frontend_kwargs


def make_arg_parser(parser):
    parser.add_argument("model_tag", type=str, nargs="?", help="The model tag to serve")
    parser.add_argument("--headless", action="store_true", default=False,
                        help="Run in headless mode.")
    parser.add_argument("--api-server-count", "-asc", type=int, default=None,
                        help="How many API server processes to run.")
    parser.add_argument("--config", help="Read CLI options from a config file.")
    parser = FrontendArgs.add_cli_args(parser)
    parser = AsyncEngineArgs.add_cli_args(parser)
    return parser


def validate_parsed_serve_args(args: argparse.Namespace):
    parser = argparse.ArgumentParser()
    parser.add_argument("--not-a-serve-flag")
