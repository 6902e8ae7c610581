"""Click wiring only: parse arguments, call one command function, exit with its code."""

from __future__ import annotations

import math
import signal
import sys
from typing import TYPE_CHECKING, Callable

import click

from patchkit import __version__
from patchkit.cli import error_handler, exit_codes
from patchkit.commands import output
from patchkit.base.constants import DEFAULT_LOCK_TIMEOUT, MAX_LOCK_TIMEOUT

if TYPE_CHECKING:
    from patchkit.engine.registry import PatchSets

_CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def _exit_codes_epilog(command: str | None, cmd: click.Command | None = None) -> str:
    options = None
    if cmd is not None:
        commands = list(cmd.commands.values()) if isinstance(cmd, click.Group) else [cmd]
        options = frozenset(opt for c in commands for param in c.params for opt in getattr(param, "opts", ()))
    return "\b\n" + exit_codes.help_text(command, options)  # \b: click prints the table as written


def _wants_json() -> bool:
    ctx = click.get_current_context(silent=True)
    return bool(ctx and (ctx.params.get("as_json") or ctx.params.get("fmt") == "json"))


def _exit(command: Callable[[], int]) -> None:
    # `patchkit ... | head` ends quietly, as other command-line tools do.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(error_handler.flush(error_handler.run(command, _wants_json(), _patch_sets())))


def _patch_sets() -> PatchSets | None:
    """The patch sets this command line names (made by `main`, added to by `--patches` after the command)."""
    ctx = click.get_current_context(silent=True)
    return ctx.find_root().obj if ctx is not None else None


class _Group(click.Group):
    """With --json, a usage error click finds (unknown option, missing value) is JSON too; a
    Ctrl-C while click itself runs (before a command started) is exit 130 with patchkit's
    message, not click's "Aborted!" and exit 1."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        argv = list(sys.argv[1:] if args is None else args)
        if not standalone_mode:
            return super().main(argv, prog_name, complete_var, standalone_mode, **extra)
        as_json = "--json" in argv
        if (sys.stdout is None or sys.stderr is None) and (closed := error_handler.closed_stdout()):
            sys.exit(closed)  # `patchkit ... >&-`
        try:
            code = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.Abort:
            sys.exit(error_handler.run(_interrupted, as_json))
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except _NO_COMMAND as exc:
            # A group typed alone (bare `patchkit`): its help, as --help prints it, and exit 0 (click
            # 8.2 made it a usage error; 8.1 printed it so).
            sys.exit(error_handler.flush(error_handler.run(lambda: _help(exc.ctx))))
        except click.exceptions.UsageError as exc:
            # One format for every usage error, click's own included: one `error:` line (no usage block).
            sys.exit(error_handler.failed(exc.exit_code, _usage_message(exc), as_json=as_json))
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except OSError as exc:
            # Raised while click itself ran (a command's own are its error handler's, _exit); one
            # naming no file is click's output (--help, --version) to a full stdout.
            if exc.filename is None:
                output.stdout_failed(exc)
            sys.exit(error_handler.run(lambda: _reraise(exc), as_json))
        sys.exit(code if isinstance(code, int) else 0)


# click >= 8.2 raises it for a group without a command; 8.1 printed the help itself (Exit 0).
_NO_COMMAND = getattr(click.exceptions, "NoArgsIsHelpError", ())


def _help(ctx: click.Context | None) -> int:
    if ctx is not None:
        output.text(ctx.get_help() + "\n")
    return 0


def _usage_message(exc: click.exceptions.UsageError) -> str:
    message = exc.format_message()
    if isinstance(exc, click.NoSuchOption) and exc.ctx is not None:
        # An option of other commands (`status --only`): theirs, not click's nearest spelling (--json).
        theirs = [name for name, command in _commands(main) if exc.option_name in _options(command)]
        if theirs:
            where = theirs[0] if len(theirs) == 1 else ", ".join(theirs[:-1]) + " and " + theirs[-1]
            this = " ".join(exc.ctx.command_path.split()[1:]) or "patchkit"
            message = f"No such option '{exc.option_name}' for {this} ({where} take{'s' * (len(theirs) == 1)} it)"
    if exc.ctx is not None and "--help" not in message:
        what = "commands" if isinstance(exc.ctx.command, click.Group) else "options"
        path = " ".join(["patchkit", *exc.ctx.command_path.split()[1:]])  # whatever name started it
        message = f"{message.rstrip('.')}; `{path} --help` lists its {what}"
    return message


def _commands(group: click.Group, prefix: str = ""):
    """(name as typed after `patchkit`, command) of every command under `group`."""
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from _commands(command, f"{prefix}{name} ")
        else:
            yield prefix + name, command


def _options(command: click.Command) -> set[str]:
    return {opt for param in command.params for opt in getattr(param, "opts", ())}


def _interrupted() -> int:
    raise KeyboardInterrupt


def _reraise(exc: BaseException) -> int:
    raise exc


site_packages_option = click.option(
    "--site-packages", "site_packages", metavar="DIR",
    help="Folder holding sglang/ (venv site-packages, dist-packages, pip --target dir). "
         "Default: the SGLang this Python imports.",
)
source_option = click.option(
    "--source", "source", metavar="DIR",
    help="A source tree holding sglang/ (a checkout's python/ folder, or the checkout itself; an sdist tree).",
)
python_option = click.option(
    "--python", "python", metavar="PATH",
    help="The SGLang that another interpreter imports (a venv's bin/python), editable installs included.",
)


def targeting(command):
    """--site-packages, --source and --python: which SGLang a command works on."""
    return site_packages_option(source_option(python_option(command)))


target_option = click.option(
    "--target", "version", metavar="VERSION", help="The SGLang version expected; a mismatch exits 3 and changes nothing."
)
json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
class _Seconds(click.ParamType):
    """A finite number of seconds from 0 to MAX_LOCK_TIMEOUT: `nan` passes a plain FloatRange
    (no comparison with it is true) and `inf`/`1e309` would wait for ever."""

    name = "seconds"

    def convert(self, value, param, ctx):
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            seconds = math.nan
        if not (math.isfinite(seconds) and 0 <= seconds <= MAX_LOCK_TIMEOUT):
            self.fail(f"{value!r} is not a number of seconds from 0 to {MAX_LOCK_TIMEOUT:g}", param, ctx)
        return seconds


lock_timeout_option = click.option(
    "--lock-timeout", "lock_timeout", type=_Seconds(), default=DEFAULT_LOCK_TIMEOUT, show_default=True,
    metavar="SECONDS", help="How long to wait for another patchkit run on the same folder (0: fail at once); "
                            "then exit 5.",
)


_ALLOW_INCOMPLETE = ("Load a --patches folder that `bump` wrote and has not finished (conflicts, failures or files "
                     "left out remain; refused otherwise, exit 1) as what it holds; the command names what it leaves "
                     "out on stderr.")


@click.group(cls=_Group, context_settings=_CONTEXT)
@click.version_option(__version__, prog_name="patchkit")
@click.option("--patches", "patch_folders", multiple=True, metavar="DIR|FILE",
              help="Also load the patch modules and .patch/.diff files in DIR, or one diff FILE (repeatable; also "
                   "$PATCHKIT_PATCHES). Packages add theirs "
                   "through the entry point group patchkit.patches. Ids must be unique (a clash exits 2).")
@click.option("--allow-incomplete", "allow_incomplete", is_flag=True, help=_ALLOW_INCOMPLETE)
@click.pass_context
def main(ctx, patch_folders, allow_incomplete) -> None:
    """Versioned, idempotent, transactional source patches for an installed SGLang."""
    from patchkit.engine import registry

    ctx.obj = registry.PatchSets(patch_folders, allow_incomplete)  # the command runs with them (`_exit`)


@main.command()
@target_option
@targeting
@click.option("--fetch", metavar="DIR", help="Patch DIR; when it holds no SGLang, first install the pristine "
              "--target release there (downloaded once, cached, no dependencies).")
@click.option("--only", multiple=True, metavar="ID", help="Apply only this patch (repeatable).")
@click.option("--skip", multiple=True, metavar="ID", help="Do not apply this patch (repeatable).")
@click.option("--dry-run", is_flag=True, help="Print the unified diff; write nothing.")
@click.option("--force", is_flag=True, help="Overwrite files changed outside patchkit (each is named, and a copy of "
              "its bytes is kept under .patchkit/overwritten/ until the next full revert).")
@lock_timeout_option
@json_option
def apply(version, site_packages, source, python, fetch, only, skip, dry_run, force, lock_timeout, as_json) -> None:
    """Apply every patch this SGLang release needs."""
    from patchkit.commands.apply import apply as run

    _exit(lambda: run(site_packages, fetch, version, only, skip, dry_run, force, as_json, source=source, python=python,
                      lock_timeout=lock_timeout))


@main.command()
@target_option
@targeting
@json_option
def status(version, site_packages, source, python, as_json) -> None:
    """Show each patch as applied, pending, outdated, upstream-fixed, not-applicable, drifted or failed."""
    from patchkit.commands.status import status as run

    _exit(lambda: run(site_packages, version, as_json, source=source, python=python))


@main.command()
@target_option
@targeting
@click.option("--only", multiple=True, metavar="ID", help="Revert only this patch (repeatable).")
@click.option("--force", is_flag=True, help="Restore files even if they changed outside patchkit (each is named, and "
              "a copy of its bytes is kept under .patchkit/overwritten/).")
@lock_timeout_option
@json_option
def revert(version, site_packages, source, python, only, force, lock_timeout, as_json) -> None:
    """Restore the pristine bytes of every file patchkit changed."""
    from patchkit.commands.revert import revert as run

    _exit(lambda: run(site_packages, version, only, force, as_json, source=source, python=python,
                      lock_timeout=lock_timeout))


@main.command()
@target_option
@targeting
@json_option
def diff(version, site_packages, source, python, as_json) -> None:
    """Unified diff, pristine -> current, of the files patchkit changed."""
    from patchkit.commands.diff import diff as run

    _exit(lambda: run(site_packages, version, as_json, source=source, python=python))


@main.command()
@targeting
@lock_timeout_option
@json_option
def clean(site_packages, source, python, lock_timeout, as_json) -> None:
    """Remove the .patchkit/ state of a release that was upgraded or uninstalled (never live patches:
    `revert` restores those)."""
    from patchkit.commands.clean import clean as run

    _exit(lambda: run(site_packages, source, python, as_json, lock_timeout))


@main.command(name="list")
@json_option
def list_command(as_json) -> None:
    """The patches known, their version ranges and upstream references."""
    from patchkit.commands.list import list_patches

    _exit(lambda: list_patches(as_json))


@main.command()
@click.option("--to", "to", metavar="V", help="The release to move the patch set to.")
@click.option("--from", "first", metavar="V0", help="The release the patches are for now (default: the tree's "
              "release, from its state file or installed version; else the release the loaded diffs were made for).")
@click.option("-o", "--output", "out", metavar="DIR", help="Where the re-made diffs, the conflict trees and "
              "REPORT.md go (default: ./patchkit-bump-V; a new or empty folder, or one a bump wrote: the files its "
              "record names are replaced).")
@click.option("--launch", "launches", multiple=True, metavar="\"ARGS\"", help="A sglang.launch_server line to "
              "check with doctor on V0 and on V, side by side (repeatable).")
@click.option("--continue", "resume", metavar="DIR", help="Complete a bump once the conflict blocks in DIR are "
              "resolved: re-check them against V, write the set and the report.")
@click.option("--latest", is_flag=True, help="V: the newest release on the package index (exit 3 where the "
              "index cannot be asked; exit 0, nothing to do, where V0 is that release already).")
@targeting
@click.option("--gpus", type=int, metavar="N", help="For --launch: GPUs on the machine (default: nvidia-smi).")
@click.option("--gpu-memory", type=float, metavar="GIB", help="For --launch: total memory per GPU.")
@click.option("--gpu-free", type=float, metavar="GIB", help="For --launch: free memory per GPU at weight load.")
@click.option("--sm", metavar="MAJOR.MINOR", help="For --launch: compute capability.")
@click.option("--json", "fmt", flag_value="json", help="The report as JSON (for CI).")
@click.option("--markdown", "fmt", flag_value="markdown", help="The report as Markdown (REPORT.md) on stdout.")
def bump(to, first, out, launches, resume, latest, site_packages, source, python, gpus, gpu_memory, gpu_free, sm,
         fmt) -> None:
    """Move every patch in force to release V: each one's verdict on V0 and V, the diffs re-made
    for V into DIR, conflicts to resolve there, launch lines checked on both, REPORT.md. Never
    writes the tree or its state."""
    from patchkit.commands.bump import bump as run
    from patchkit.doctor.gpu import Overrides

    overrides = Overrides(gpus=gpus, gpu_memory=gpu_memory, gpu_free=gpu_free, sm=sm)
    _exit(lambda: run(to, first, out, launches, fmt or "text", resume, latest, site_packages, source, python,
                      overrides))


@main.command()
@click.argument("patch_id", metavar="ID")
@click.option("--target", "target", required=True, metavar="FILE", help="The file it edits, e.g. sglang/srt/managers/scheduler.py.")
@click.option("--class", "cls", default="TODO", show_default=True, metavar="NAME", help="The class it edits.")
@click.option("--method", default="__init__", show_default=True, metavar="NAME", help="The method it edits.")
@click.option("--out", metavar="DIR", help="Folder for the patch module (default: the checkout's patches/).")
@click.option("--tests", metavar="DIR", help="Folder for its test (default: tests/patches/, or DIR/tests with --out).")
@json_option
def new(patch_id, target, cls, method, out, tests, as_json) -> None:
    """Write a new patch module and its before/after test from templates (see docs/AUTHORING.md)."""
    from patchkit.commands.new import new as run

    _exit(lambda: run(patch_id, target, cls, method, out, tests, as_json=as_json))


@main.group()
def manifest() -> None:
    """Per-release manifests: which patches a release carries, pristine sha256 per file."""


@manifest.command()
@click.argument("versions", nargs=-1, required=True)
@click.option("--out", metavar="DIR", help="Folder to write VERSION.json into (default: the checkout's manifests/; "
              "required when patchkit is an installed copy).")
@json_option
def update(versions, out, as_json) -> None:
    """Regenerate manifests/VERSION.json from the real release files."""
    from patchkit.commands.manifest import update as run

    _exit(lambda: run(versions, out, as_json=as_json))


@manifest.command()
@click.argument("versions", nargs=-1)
@json_option
def check(versions, as_json) -> None:
    """Exit 1 when a committed manifest disagrees with its release (default: all)."""
    from patchkit.commands.manifest import check as run

    _exit(lambda: run(versions, as_json=as_json))


@main.command()
@click.option("--from", "first", required=True, metavar="A", help="Release (or git revision with --git).")
@click.option("--to", "last", required=True, metavar="B", help="Release (or git revision / branch with --git).")
@click.option("--git", "git_path", metavar="PATH", help="A local clone of the SGLang repository (no checkout needed).")
@json_option
def track(first, last, git_path, as_json) -> None:
    """Each patch on A and B (applies, upstream-fixed, moved, broken, not-applicable), and the
    upstream diff of the functions it works on."""
    from patchkit.commands.track import track as run

    _exit(lambda: run(first, last, git_path, as_json))


@main.command()
@click.option("--from", "first", metavar="A", help="First release (default: the oldest patchkit knows).")
@click.option("--to", "last", metavar="B", help="Last release (default: the newest patchkit knows).")
@click.option("--json", "fmt", flag_value="json", help="JSON output.")
@click.option("--markdown", "fmt", flag_value="markdown", help="A Markdown table (for a README).")
@click.option("--with-post", is_flag=True, help="Also the post releases the package index has in the range "
              "(0.5.12.post1, ...); those a loaded diff was made for are shown without it.")
def matrix(first, last, fmt, with_post) -> None:
    """Every patch against every release in a range, as a table."""
    from patchkit.commands.track import matrix as run

    _exit(lambda: run(first, last, fmt or "text", with_post))


@main.command()
@targeting
@click.option("--strict", is_flag=True, help="Fail when a patch this release needs is not applied, or a check "
              "could not run (an import whose dependencies are missing here).")
@click.option("--allow-skipped", is_flag=True, help="With --strict: accept checks that could not run (still listed).")
@click.option("--url", metavar="URL", help="Audit a running server instead: read its /server_info (GET, with a timeout) "
              "and compare each DP rank's patchkit report with what should be there; exit 1 naming each missing, "
              "extra, outdated or drifted patch, 3 when it cannot be read or carries no report.")
@click.option("--expect-from", "expect_from", metavar="DIR|IMAGE-LABELS", help="With --url: expect the patches "
              "recorded in a patched folder, or an image's io.patchkit.* labels (`docker inspect` output or a JSON "
              "object of labels); default: the patch set patchkit would apply to the release the server runs.")
@json_option
def verify(site_packages, source, python, strict, allow_skipped, url, expect_from, as_json) -> None:
    """Check a patched environment without changing it: recorded bytes, compilation, imports
    and runtime hooks in a fresh child interpreter; or, with --url, a running server's report."""
    from patchkit.commands.verify import verify as run

    _exit(lambda: run(site_packages, python, strict, as_json, source=source, allow_skipped=allow_skipped,
                      url=url, expect_from=expect_from))


@main.command()
@click.argument("patch", metavar="PATCH...", nargs=-1)
@click.option("--to", "to", metavar="V", help="The release to re-make the diff against.")
@click.option("--from", "first", metavar="V", help="The release the diff was made against, where its index lines "
              "do not tell (default: the cached release whose files have its pre-image blob hashes).")
@click.option("-o", "--output", "out", metavar="FILE", help="Write here instead of stdout.")
@click.option("--tree", metavar="DIR", help="Write V's files of the rebased diff, conflict blocks and all, into "
              "this new folder to resolve them there; then `rebase --continue DIR` (several PATCHes, a stack: "
              "one DIR/NAME.tree each, finished in stack order).")
@click.option("--continue", "resume", metavar="DIR", help="The finished diff from a folder `--tree` wrote, once its "
              "conflict blocks are resolved.")
@json_option
def rebase(patch, to, first, out, tree, resume, as_json) -> None:
    """A diff patch re-made against release V per unit of code: same header and path prefix,
    V's blob hashes, conflicting units written with conflict markers and listed."""
    from patchkit.commands.rebase import rebase as run

    _exit(lambda: run(patch, to, first, out, as_json, tree=tree, resume=resume))


@main.command()
@click.argument("patch_id", metavar="ID")
@click.option("--out", metavar="DIR", help="Folder for ID.patch (default: ./sglang-patches; created when its parent "
              "exists).")
@targeting
@json_option
def capture(patch_id, out, site_packages, source, python, as_json) -> None:
    """Write the hand edits of an installed SGLang (against its release's wheel) as a diff patch
    DIR/ID.patch; the tree is left as it is. Files patchkit wrote are not part of it."""
    from patchkit.commands.capture import capture as run

    _exit(lambda: run(patch_id, out, site_packages, source, python, as_json))


@main.command()
@click.argument("patch_id", metavar="ID")
@click.option("--release", "version", required=True, metavar="V", help="The SGLang release to make it against "
              "(its pristine files, from its wheel).")
@click.option("-o", "--output", "out", metavar="FILE", help="Write here instead of stdout.")
@click.option("--author", metavar="'NAME <EMAIL>'", help="The From: line (default: patchkit <patchkit@localhost>).")
@json_option
def export(patch_id, version, out, author, as_json) -> None:
    """A patch as a `git format-patch` file against release V, with the paths of an SGLang
    checkout (python/sglang/...): `git am` or `git apply` there."""
    from patchkit.commands.export import export as run

    _exit(lambda: run(patch_id, version, out, author, as_json))


@main.group()
def image() -> None:
    """Patched container images: a Dockerfile that applies and verifies at build time."""


_image_options = [
    click.option("--base", required=True, metavar="IMAGE", help="Base image, e.g. lmsysorg/sglang:v0.5.17."),
    click.option("--target", "version", required=True, metavar="VERSION",
                 help="The SGLang version in the base image (0.5.17, or the tag's spelling v0.5.17)."),
    click.option("--python", "python", default="python3", show_default=True, metavar="PATH",
                 help="The image's Python that serves SGLang (patchkit gets a venv of its own beside it)."),
    click.option("--wheel", metavar="FILE", help="Install patchkit from this wheel (default: one built from the checkout patchkit runs "
                 "from). The build context also carries every --patches / entry-point patch set."),
    click.option("--ca-cert", "ca_cert", metavar="FILE",
                 help="Extra CA certificates (PEM) for pip inside the build, e.g. a corporate proxy's."),
    click.option("--allow-skipped", is_flag=True, help="A base without SGLang's dependencies: let verify skip the "
                 "import checks it cannot run (listed in the build log) instead of failing the build."),
]


def _with_image_options(command):
    for option in reversed(_image_options):
        command = option(command)
    return command


@image.command(name="dockerfile")
@_with_image_options
@click.option("-o", "--output", "out", metavar="FILE", help="Write here instead of stdout.")
@json_option
def image_dockerfile(base, version, python, wheel, ca_cert, allow_skipped, out, as_json) -> None:
    """Write the Dockerfile of a patched image."""
    from patchkit.commands.image import write_dockerfile

    _exit(lambda: write_dockerfile(base, version, wheel, out, python=python, ca_cert=ca_cert,
                                   allow_skipped=allow_skipped, as_json=as_json))


@image.command(name="build")
@_with_image_options
@click.option("-t", "--tag", required=True, help="Tag of the image to build.")
@click.option("--builder", type=click.Choice(["auto", "docker", "podman", "buildah"]), default="auto",
              show_default=True, help="auto: the first of docker, podman, buildah that really answers.")
@click.option("--push", metavar="REF", help="Then push the image to this registry reference and print its digest.")
@json_option
def image_build(base, version, python, wheel, ca_cert, allow_skipped, tag, builder, push, as_json) -> None:
    """Build the patched image with docker, podman or buildah (and push it)."""
    from patchkit.commands.image import build

    _exit(lambda: build(base, version, wheel, tag, builder, python=python, ca_cert=ca_cert, push=push,
                        allow_skipped=allow_skipped, as_json=as_json))


class _LaunchUsageError(click.UsageError):
    """A doctor usage error as one `error:` line (exit 2; with --json `_Group` adds the JSON error),
    naming the usual slip: a launch flag before `--`."""

    def show(self, file=None) -> None:
        error_handler.failed(self.exit_code, self.format_message())


class _DoctorCommand(click.Command):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:
            raise _LaunchUsageError(
                f"{exc.option_name} is not a doctor option; pass the sglang.launch_server arguments after --: "
                f"patchkit doctor [OPTIONS] -- {exc.option_name} ...") from None
        except click.UsageError as exc:
            raise _LaunchUsageError(exc.format_message()) from None


@main.command(cls=_DoctorCommand, context_settings={**_CONTEXT, "allow_interspersed_args": False})
@click.option("--version", "version", metavar="V", help="Check against SGLang V (fetched into the cache) "
              "instead of the installed one.")
@site_packages_option
@source_option
@click.option("--python", "python", metavar="PATH",
              help="The serving interpreter (a venv's bin/python): the SGLang it imports is checked, unless "
                   "--version/--site-packages/--source names another, and the release's model classes are built in "
                   "it to size the weights (it needs torch; default: this Python, where it has torch).")
@click.option("--gpus", type=int, metavar="N", help="GPUs on the machine (default: nvidia-smi).")
@click.option("--gpu-memory", type=float, metavar="GIB", help="Total memory per GPU (default: nvidia-smi).")
@click.option("--gpu-free", type=float, metavar="GIB", help="Free memory per GPU at weight-load start, the "
              "\"avail mem\" SGLang logs (default: estimated from what the release takes before the weights load, "
              "with a range).")
@click.option("--sm", metavar="MAJOR.MINOR", help="Compute capability (default: nvidia-smi).")
@click.option("--interconnect", type=click.Choice(["nvlink", "pcie"]), help="How the GPUs talk (default: nvidia-smi topo).")
@click.option("--wsl", is_flag=True, help="Running under WSL2 (default: detected).")
@click.option("--integrated", is_flag=True, help="A unified-memory GPU (GB10 class; default: from its name).")
@json_option
@click.argument("launch_args", nargs=-1, type=click.UNPROCESSED)
def doctor(version, site_packages, source, python, gpus, gpu_memory, gpu_free, sm, interconnect, wsl, integrated,
           as_json, launch_args) -> None:
    """Check an SGLang launch before it runs: the memory budget as that release computes it, and
    the known traps. Pass the sglang.launch_server arguments after --."""
    from patchkit.commands.doctor import doctor as run
    from patchkit.doctor.gpu import Overrides

    overrides = Overrides(gpus=gpus, gpu_memory=gpu_memory, gpu_free=gpu_free, sm=sm, interconnect=interconnect,
                          wsl=wsl, integrated=integrated)
    _exit(lambda: run(version, site_packages, overrides, launch_args, as_json, source=source, python=python))


def _patches_after_the_command(ctx, param, folders) -> None:
    if folders:
        ctx.find_root().obj.add(folders)


def _allow_incomplete_after_the_command(ctx, param, allowed) -> None:
    if allowed:
        ctx.find_root().obj.add((), allow_incomplete=True)


def _accept_patches(group: click.Group) -> None:
    """`--patches DIR` is also taken after the subcommand (`patchkit list --patches DIR`), adding to
    any given before it."""
    for command in group.commands.values():
        if isinstance(command, click.Group):
            _accept_patches(command)
            continue
        command.params.insert(0, click.Option(
            ["--patches"], multiple=True, metavar="DIR|FILE", expose_value=False, callback=_patches_after_the_command,
            help="As `patchkit --patches DIR COMMAND`: also load these patch modules and diffs (repeatable)."))
        command.params.insert(1, click.Option(
            ["--allow-incomplete"], is_flag=True, expose_value=False, callback=_allow_incomplete_after_the_command,
            help="As `patchkit --allow-incomplete COMMAND`: " + _ALLOW_INCOMPLETE[0].lower() + _ALLOW_INCOMPLETE[1:]))


def _list_exit_codes(group: click.Group, prefix: str = "") -> None:
    """Each command's --help lists the exit codes it can return (exit_codes.COMMAND_CODES);
    `patchkit --help` lists them all."""
    if not prefix:
        group.epilog = _exit_codes_epilog(None)
    for name, command in group.commands.items():
        command.epilog = _exit_codes_epilog(prefix + name, command)
        if isinstance(command, click.Group):
            _list_exit_codes(command, prefix + name + " ")


_accept_patches(main)
_list_exit_codes(main)
