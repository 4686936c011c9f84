"""Launch wrappers: the commands in front of a server that run it (``srun``, ``uv run`` ...).

The launch reader (:mod:`.launch`) steps over them to find the server and its flags.
Each wrapper's options are read as the wrapper reads them, so that an option's value is
never taken for the program:

=================  =====================================================================
wrapper            what is stepped over
=================  =====================================================================
``exec``           ``-a NAME``, ``-c``, ``-l``
``env``            options (``-u NAME``, ``-C DIR``, ``-S``), then its ``K=V`` words,
                   which count as the launch's prefixes (they win over the script's)
``nohup``          nothing more
``setsid``         switches (``-f``, ``-w``)
``time``           ``-p``; GNU time's ``-o FILE``, ``-f FORMAT``
``stdbuf``         ``-i``/``-o``/``-e MODE``
``command``        ``-p``
``numactl``        ``-N``/``-m``/``-C``/``-i``/``-p`` with a value, ``--cpunodebind``,
                   ``--membind``, ``--physcpubind``, ``--interleave``, ``--preferred``
                   with ``=`` or a value word
``taskset``        its switches, then the mask or CPU list (``taskset -c 0-7``, ``taskset 0xff``)
``srun``           Slurm's options with a value (``-N 1``, ``--nodes 1``, ``--gres=gpu:8``,
                   ``--container-image IMG`` ...), its switches
``mpirun``,        ``-np N``, ``-x VAR``, ``-H HOSTS``, ``--bind-to X``, ``--map-by X``,
``mpiexec``        ``--hostfile F`` ...; ``-mca K V`` / ``-env K V`` (two words)
``torchrun``       ``--nproc-per-node N`` (or ``_``), ``--nnodes``, ``--master-addr`` ...,
                   then ``-m MODULE`` (``torchrun ... -m sglang.launch_server``)
``uv run``         ``--with PKG``, ``--python V``, ``--project DIR``, ``--env-file F`` ...,
                   its switches, ``--``
``uvx``            ``--from PKG``, ``--with PKG``, ``--python V``
=================  =====================================================================

A long option with ``=`` (``--nodes=2``) is one word everywhere.  A wrapper's option the
table does not know is read as a switch; a launch the reader does not recognise at all
is no launch, and ``target show`` names the command (never a silent guess).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable
from typing import Sequence


@dataclass(frozen=True)
class Wrapper:
    """How one wrapper's options are read."""

    valued: frozenset[str] = frozenset()  # options whose value is the next word
    short_valued: bool = False  # every ``-X`` (two characters) takes the next word
    pairs: frozenset[str] = frozenset()  # options taking the next two words
    positional: int = 0  # words before the command (taskset's mask)
    module: bool = False  # ``-m MODULE`` follows: the wrapper is the interpreter (torchrun)


def _set(words: str) -> frozenset[str]:
    return frozenset(words.split())


WRAPPERS: dict[str, Wrapper] = {
    "nohup": Wrapper(),
    "setsid": Wrapper(),
    "command": Wrapper(),
    "time": Wrapper(_set("-o -f --output --format")),
    "stdbuf": Wrapper(short_valued=True),
    "numactl": Wrapper(_set("--cpunodebind --membind --physcpubind --interleave --preferred "
                            "--cpubind"), short_valued=True),
    "taskset": Wrapper(positional=1),
    "srun": Wrapper(_set(
        "--nodes --ntasks --ntasks-per-node --cpus-per-task --gres --gpus --gpus-per-node "
        "--gpus-per-task --partition --time --job-name --nodelist --exclude --output --error "
        "--input --export --mpi --container-image --container-mounts --container-workdir "
        "--container-name --container-env --mem --mem-per-cpu --mem-per-gpu --account --qos "
        "--distribution --cpu-bind --chdir --dependency --het-group --reservation "
        "--constraint --signal --kill-on-bad-exit --network"), short_valued=True),
    "mpirun": Wrapper(_set(
        "-np -n -N -x -H -host --host --hostfile -hostfile --machinefile -machinefile "
        "--bind-to -bind-to --map-by -map-by --rank-by -rank-by -ppn --npernode -npernode "
        "-wdir --wdir --prefix -c"), pairs=_set("-mca --mca -gmca --gmca -env -genv")),
    "torchrun": Wrapper(_set(
        "--nproc-per-node --nproc_per_node --nnodes --node-rank --node_rank --master-addr "
        "--master_addr --master-port --master_port --rdzv-backend --rdzv_backend "
        "--rdzv-endpoint --rdzv_endpoint --rdzv-id --rdzv_id --rdzv-conf --rdzv_conf "
        "--max-restarts --max_restarts --monitor-interval --start-method --log-dir "
        "--log_dir --redirects --tee --local-addr --role"), module=True),
    "uv run": Wrapper(_set(
        "--with --with-editable --with-requirements --python -p --project --directory "
        "--env-file --package --extra --group --index --default-index --index-url "
        "--extra-index-url --find-links -f --config-file --cache-dir")),
    "uvx": Wrapper(_set("--from --with --with-editable --with-requirements --python -p "
                        "--index --index-url --extra-index-url")),
}
WRAPPERS["mpiexec"] = WRAPPERS["mpirun"]


def wrapper_at(texts: Sequence[str | None], k: int) -> tuple[Wrapper, int] | None:
    """The wrapper whose name starts at ``texts[k]`` and the index after its name."""
    name = (texts[k] or "").rsplit("/", 1)[-1]
    if name == "uv" and k + 1 < len(texts) and texts[k + 1] == "run":
        return WRAPPERS["uv run"], k + 2
    found = WRAPPERS.get(name)
    return (found, k + 1) if found is not None else None


def skip_options(texts: Sequence[str | None], k: int, w: Wrapper,
                 is_option: Callable[[str], bool]) -> int:
    """The index of the wrapped command's first word after the wrapper's options at ``k``
    (for a ``module`` wrapper: the word before ``-m``, which then plays the interpreter)."""
    while k < len(texts):
        t = texts[k] or ""
        if t == "--":
            k += 1
            break
        if not is_option(t):
            break
        name = t.partition("=")[0]
        if "=" in t:
            k += 1
        elif name in w.pairs:
            k += 3
        elif name in w.valued or (w.short_valued and len(t) == 2):
            k += 2
        elif w.module and t == "-m":
            return k - 1
        else:
            k += 1
    return min(k + w.positional, len(texts))
