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
``apptainer exec``  Apptainer's / Singularity's options (``--bind X``, ``--env K=V``,
``singularity      ``--nv``, ``--cleanenv`` ...), then the image; also ``run``
exec``
``sudo``           ``-u USER``, ``-g GROUP``, ``-C N`` ...; its switches
=================  =====================================================================

How each wrapper passes the script's environment on (:func:`env_dropped`): some give the
wrapped command none of it, and an ``export`` in the script then never reaches the
server.  The bash format refuses such a write (naming the line, why, and how to pass the
variable), rather than exit 0 after a change nobody reads:

=======================  ================================================================
wrapper                  drops the environment
=======================  ================================================================
``apptainer``/           with ``--cleanenv`` / ``-e`` / ``--containall`` / ``-C``: only
``singularity exec``     ``--env K=V`` (``--env-file F``) and the script's
                         ``APPTAINERENV_K`` / ``SINGULARITYENV_K`` (as ``K``; ``--env``
                         wins, then ``APPTAINERENV_``) reach the command
``env``                  with ``-i`` / ``--ignore-environment`` / ``-``: only its
                         ``K=V`` words
``sudo``                 always (``env_reset``), unless ``-E`` / ``--preserve-env``:
                         ``sudo K=V cmd`` or ``--preserve-env=K`` pass one
``docker run``/          always: the container gets only its ``-e K=V`` / ``--env K=V``
``podman run``           (``--env-file F``) options; ``-e K`` passes the script's ``K``
                         through; podman's ``--env-host`` passes all of it
=======================  ================================================================

``docker run`` / ``podman run`` are *container* wrappers: the launch reader does not
step over them but reads them as a container launch (:func:`.launch.launch_shape`), whose
``-e`` options are the server's environment and where a new knob becomes one more
``-e K=V``; an ``export K=V`` or a ``K=V docker run`` prefix reaches the server only
through an ``-e K`` of that launch.  ``apptainer``/``singularity exec --cleanenv`` is
read the same way (its ``--env`` options).

A long option with ``=`` (``--nodes=2``) is one word everywhere.  A wrapper's option the
table does not know is read as a switch; a launch the reader does not recognise at all
is no launch, and ``target show`` names the command (never a silent guess).
"""

from __future__ import annotations

import re
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
    # How the script's environment reaches the wrapped command (see the module docstring):
    clears: frozenset[str] = frozenset()  # options with which it gets none of it
    clears_always: bool = False  # it gets none of it unless one of ``keeps`` is given
    keeps: frozenset[str] = frozenset()
    passes: str = ""  # how one variable is passed then ("--env K=V")
    container: bool = False  # read as a container launch, never stepped over (docker run)
    env_prefixes: tuple[str, ...] = ()  # script variables PREFIX_K that set K inside


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
WRAPPERS["apptainer exec"] = Wrapper(
    _set("--bind -B --mount --env --env-file --home -H --overlay -o --pwd --workdir -W "
         "--security --network --network-args --apply-cgroups --hostname --fusemount "
         "--scratch -S --app --add-caps --drop-caps --cpus --memory --config --dns"),
    positional=1, clears=_set("--cleanenv -e --containall -C"),
    passes="--env K=V (or --env-file F, or export APPTAINERENV_K=V)",
    env_prefixes=("APPTAINERENV_", "SINGULARITYENV_"))
CONTAINER_ENV_PREFIXES = WRAPPERS["apptainer exec"].env_prefixes
for _name in ("apptainer run", "singularity exec", "singularity run"):
    WRAPPERS[_name] = WRAPPERS["apptainer exec"]
WRAPPERS["sudo"] = Wrapper(
    _set("-u --user -g --group -C --close-from -D --chdir -h --host -p --prompt -r --role "
         "-t --type -U --other-user -T --command-timeout"),
    clears_always=True, keeps=_set("-E --preserve-env"),
    passes="sudo K=V CMD, or sudo --preserve-env=K")
# docker/podman run options that take a value word (the rest are switches).
WRAPPERS["docker run"] = WRAPPERS["podman run"] = Wrapper(
    _set("""-e --env --env-file -v --volume -p --publish --name --gpus --shm-size --ipc
    --network --net -w --workdir --entrypoint --ulimit --runtime --device --cap-add --cap-drop
    --security-opt --mount -u --user -h --hostname -l --label -m --memory --cpus
    --cpuset-cpus --restart --log-driver --log-opt --pid --platform --add-host --dns
    --group-add --tmpfs --expose --stop-signal --stop-timeout --memory-swap --cgroupns --uts
    --userns --pull --label-file --volumes-from --link --oom-score-adj --cidfile --ip
    --health-cmd --annotation --pod --uidmap --gidmap"""),
    positional=1, clears_always=True, keeps=_set("--env-host"), container=True,
    passes="-e K=V on the docker run line, or -e K to pass the script's K")
TWO_WORDS = {"uv": ("run",), "apptainer": ("exec", "run"), "singularity": ("exec", "run"),
             "docker": ("run",), "podman": ("run",)}


def wrapper_at(texts: Sequence[str | None], k: int) -> tuple[Wrapper, int] | None:
    """The wrapper whose name starts at ``texts[k]`` and the index after its name."""
    name = (texts[k] or "").rsplit("/", 1)[-1]
    if name in TWO_WORDS and k + 1 < len(texts) and texts[k + 1] in TWO_WORDS[name]:
        return WRAPPERS[f"{name} {texts[k + 1]}"], k + 2
    found = WRAPPERS.get(name)
    return (found, k + 1) if found is not None else None


def skip_options(texts: Sequence[str | None], k: int, w: Wrapper,
                 is_option: Callable[[str], bool], seen: list[str] | None = None) -> int:
    """The index of the wrapped command's first word after the wrapper's options at ``k``
    (for a ``module`` wrapper: the word before ``-m``, which then plays the interpreter);
    ``seen`` gets the name of each option read (never an option's value)."""
    while k < len(texts):
        t = texts[k] or ""
        if t == "--":
            k += 1
            break
        if not is_option(t):
            break
        name = t.partition("=")[0]
        if seen is not None:
            seen.append(name)
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


_ENV_CLEARS = frozenset({"-i", "--ignore-environment", "-"})
_SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh"})
_DASH_C = re.compile(r"-[a-z]*c[a-z]*\Z")


def script_index(values: Sequence[str]) -> int | None:
    """The index of the script word of a ``sh -c SCRIPT`` argv (None: no shell runs)."""
    for i, v in enumerate(values[:-1]):
        if v.rsplit("/", 1)[-1] in _SHELLS and _DASH_C.match(values[i + 1]):
            return i + 2 if i + 2 < len(values) else None
    return None


def env_dropped(texts: Sequence[str | None], k: int,
                is_option: Callable[[str], bool]) -> tuple[int, str, str] | None:
    """Where a command's wrappers give the wrapped command none of the script's
    environment: ``(index of the wrapper's name, what drops it, how to pass one variable
    instead)``, walking the wrappers from ``texts[k]`` (None: each wrapper passes it on)."""
    while k < len(texts):
        name = (texts[k] or "").rsplit("/", 1)[-1]
        if name == "env":
            j = k + 1
            while j < len(texts) and texts[j] is not None and is_option(texts[j] or "-x"):
                if texts[j] in _ENV_CLEARS:
                    return k, f"env {texts[j]}", "its K=V words (env -i K=V CMD)"
                j += 1
            if j < len(texts) and texts[j] == "-":
                return k, "env -", "its K=V words (env - K=V CMD)"
            while j < len(texts) and "=" in (texts[j] or "") and not (texts[j] or "=").startswith("="):
                j += 1
            k = j
            continue
        found = wrapper_at(texts, k)
        if found is None:
            return None
        w, j = found
        names: list[str] = []
        end = skip_options(texts, j, w, is_option, names)
        opts = set(names)
        label = " ".join(t or "" for t in texts[k:j])
        if opts & w.clears:
            return k, f"{label} {sorted(opts & w.clears)[0]}", w.passes
        if w.clears_always and not opts & w.keeps:
            return k, label, w.passes
        k = end
    return None
