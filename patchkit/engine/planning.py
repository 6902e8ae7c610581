"""Plan applies and reverts in memory, from each patch's state (`patchkit.engine.decide`): the writes,
the new state and what they would overwrite; `patchkit.store.transaction` commits a plan to disk."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from patchkit.engine import decide
from patchkit.engine import registry
from patchkit.store import state as state_mod
from patchkit.base.errors import DriftError, PlanError
from patchkit.engine.patch_status import APPLIED, DRIFTED, FAILED, OUTDATED, PENDING, PatchStatus
from patchkit.store.state import FileRecord, State
from patchkit.store.target import Target
from patchkit.store.transaction import FileWrite
from patchkit.base.util import sha256
from patchkit.engine import view as view_mod  # render_file through the module: the fault tests replace it
from patchkit.engine.view import View, open_view


@dataclass(frozen=True)
class Plan:
    target: Target
    statuses: tuple[PatchStatus, ...]  # what each selected patch was before the plan
    writes: tuple[FileWrite, ...]
    old_state: State | None
    new_state: State | None
    warnings: tuple[str, ...] = ()
    acted: tuple[str, ...] = ()  # ids the plan applies or reverts
    lost: dict[str, bytes] = field(default_factory=dict)  # {rel: outside edits `--force` overwrites}
    switchable: tuple[str, ...] = ()  # patches that honour SGLANG_PATCHKIT_DISABLE (the runtime report's)

    @property
    def changes_files(self) -> bool:
        return bool(self.writes)

    @property
    def sglang_writes(self) -> tuple[FileWrite, ...]:
        """The writes of SGLang's files, not of the runtime report's beside them (what `apply`
        and `revert` count)."""
        report = {*(self.old_state.runtime if self.old_state else ()), *(self.new_state.runtime if self.new_state else ())}
        return tuple(w for w in self.writes if w.rel not in report)

    def diff(self) -> str:
        return "".join(unified_diff(w.rel, w.before, w.after) for w in self.writes)


class PatchesFailed(PlanError):
    """`plan_apply` refused because a patch it would apply failed; `statuses` is what every
    selected patch was judged (the others are shown too)."""

    def __init__(self, message: str, statuses: list[PatchStatus]) -> None:
        super().__init__(message)
        self.statuses = tuple(statuses)


def unified_diff(rel: str, before: bytes | None, after: bytes | None) -> str:
    import difflib  # only diffs need it; keeps `status` start-up small

    old = (before or b"").decode("utf-8", "replace").splitlines(keepends=True)
    new = (after or b"").decode("utf-8", "replace").splitlines(keepends=True)
    lines = difflib.unified_diff(old, new, f"a/{rel}" if before is not None else "/dev/null",
                                 f"b/{rel}" if after is not None else "/dev/null")
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def _unknown_after_warnings(view: View, pids: list[str]) -> list[str]:
    """A stacking order that names a patch not loaded (a typo, a set not passed) orders nothing."""
    return [f"patch {pid}: it stacks after {after} (Patchkit-After / STACK_AFTER), which is not loaded here; "
            "on a shared file the order is by id" for pid in pids for after in view.patches[pid].STACK_AFTER
            if after not in view.patches]


def _range_warnings(view: View, pids: list[str]) -> list[str]:
    from packaging.version import InvalidVersion, Version

    try:
        version = Version(view.target.version)
    except InvalidVersion:
        return []
    return [
        f"patch {pid}: SGLang {version} is outside {view.patches[pid].APPLIES_TO}, the range it was verified for"
        for pid in pids
        if not view.patches[pid].specifier().contains(version, prereleases=True)
    ]


def _render_all(view: View, wanted: dict[str, tuple[str, ...]]) -> dict[str, bytes | None]:
    """Every file's new bytes, rendered here, one after the other. patchkit starts no helper
    process for this: nothing it starts may outlive a killed run or hold its lock."""
    for ids in wanted.values():
        for pid in ids:
            if pid in view.patches:
                decide.bind_package(view, view.patches[pid])
    return {rel: view_mod.render_file(view, rel, ids) if (whole := _render_whole(view, rel, ids)) is None else whole[0]
            for rel, ids in wanted.items()}


def _render_whole(view: View, rel: str, ids: tuple[str, ...]) -> tuple[bytes | None] | None:
    """A file a diff patch creates or deletes (`new file mode` / `deleted file mode`), decided
    whole: (its new bytes, None to remove it); None for every other file (`view.render_file`)."""
    from patchkit.authoring.kind import CREATED

    kinds = {pid: kind for pid in ids if pid in view.patches
             if (kind := view.patches[pid].file_change(rel))}
    if not kinds:
        return None
    pid, kind = next(iter(kinds.items()))
    if len(ids) > 1:
        others = ", ".join(p for p in ids if p != pid)
        raise PlanError(f"patch {pid} {'creates' if kind == CREATED else 'deletes'} {rel}, which {others} also "
                        f"change(s); a file a diff creates or deletes carries that diff alone (`--skip {pid}`)")
    data = view_mod.transformed(view.patches[pid], rel, view.pristine(rel))
    if data is not None and rel.endswith(".py"):
        try:
            compile(data, rel, "exec", dont_inherit=True)
        except SyntaxError as exc:
            raise PlanError(f"patch {pid} produces invalid Python in {rel}: {exc.msg} (line {exc.lineno})") from None
    return (data,)


def _build(view: View, wanted: dict[str, list[str]], applied: list[str],
           force: bool) -> tuple[list[FileWrite], State | None, dict[str, bytes]]:
    """Writes and new state for a tree where each file carries exactly `wanted[rel]`, and the
    outside edits those writes overwrite (a file changed outside patchkit: exit 4 unless `force`)."""
    from patchkit.engine import identity

    state = view.state
    writes: list[FileWrite] = []
    files: dict[str, FileRecord] = {}
    lost: dict[str, bytes] = {}
    rendered = _render_all(view, {rel: tuple(ids) for rel, ids in wanted.items()})
    for rel, ids in sorted(wanted.items()):
        after = rendered[rel]
        before = view.read(rel)
        record = state.files.get(rel) if state else None
        pristine_sha = record.pristine if record else (None if before is None else sha256(before))
        if ids:
            # (patched None: a file the patch removed, which a diff patch does)
            files[rel] = FileRecord(pristine=pristine_sha, patched=None if after is None else sha256(after), patches=list(ids),
                                    digests=identity.digests(ids))
        if after != before:
            if record is not None and view.file_condition(rel) == "drifted" and before is not None:
                if not force:
                    raise DriftError(f"{rel} was changed outside patchkit and this run would overwrite it; nothing "
                                     "was written (use --force, which keeps a copy of those bytes, or "
                                     f"`{view.target.naming.command('diff')}`)")
                lost[rel] = before
            writes.append(FileWrite(rel=rel, before=before, after=after, pristine=view.pristine(rel)))
    new_state = State(sglang_version=view.target.version, patches=applied, files=files) if applied else None
    return writes, new_state, lost


def _current_assignment(view: View) -> dict[str, list[str]]:
    if not view.state:
        return {}
    return {rel: list(record.patches) for rel, record in view.state.files.items()}


def plan_apply(target: Target, only: tuple[str, ...] = (), skip: tuple[str, ...] = (), force: bool = False) -> Plan:
    view = open_view(target)
    ids = registry.patch_ids()
    selected = registry.select(ids, only, skip)
    statuses = decide.with_clashes(view, [decide.judge(view, pid) for pid in selected])

    drifted = [s for s in statuses if s.state == DRIFTED]
    if drifted and not force:
        s = drifted[0]
        raise DriftError(f"patch {s.id}: {s.detail}; applying would lose that change (use --force, or "
                         f"`{target.naming.command('diff')}`)")
    failed = [s for s in statuses if s.state == FAILED]
    if failed:
        s = failed[0]
        raise PatchesFailed(f"patch {s.id} cannot be applied to SGLang {target.version}: {s.detail}; nothing was "
                            f"written (`{target.naming.command('apply', '--skip', s.id)}` applies the others)", statuses)
    to_apply = [s for s in statuses if s.state in (PENDING, DRIFTED, OUTDATED)]
    if not to_apply:
        kept_state = _with_digests(view, statuses)
        if _runtime_intact(view):
            # Nothing to apply, the report's files as recorded: a no-op (no patch loaded, no libcst).
            # Their bytes depend only on patchkit and the patch sources, which the digests just proved current.
            return Plan(view.target, tuple(statuses), (), view.state, kept_state, tuple(view.warnings))
        writes, with_report = _runtime_writes(view, kept_state, force)
        return Plan(view.target, tuple(statuses), tuple(writes), view.state, with_report, tuple(view.warnings),
                    switchable=tuple(switchable(view)))

    assignment = _current_assignment(view)
    for s in to_apply:
        files = s.files if s.state in (PENDING, OUTDATED) else decide.evaluate(view, s.id, {rel: view.pristine(rel) for rel in view.patches[s.id].TARGETS}).files
        for rel in files:
            assignment.setdefault(rel, [])
            if s.id not in assignment[rel]:
                assignment[rel].append(s.id)
    classes = {pid: type(patch) for pid, patch in view.patches.items()}
    for rel in assignment:
        assignment[rel] = registry.stack(assignment[rel], classes)  # the declared stacking order
    applied_before = list(view.state.patches) if view.state else []
    applied = [pid for pid in ids if pid in applied_before or pid in {s.id for s in to_apply}]
    # A recorded patch that is not loaded here (its diff file gone, its set not passed) stays recorded.
    applied += [pid for pid in applied_before if pid not in ids]
    # Only the files of the patches applied now are rendered; every other record stays as it is
    # (a file of a patch not selected is never rewritten, drifted or not).
    touched = {rel for rel, pids in assignment.items() if any(s.id in pids for s in to_apply)}
    _refuse_over_hand_applied(view, touched, assignment, applied_before)
    writes, new_state, lost = _build(view, {rel: assignment[rel] for rel in touched}, applied, force)
    if new_state is not None and view.state is not None:
        new_state.files.update({rel: view.state.files[rel] for rel in assignment if rel not in touched})
    report_writes, new_state = _runtime_writes(view, new_state, force)
    writes.extend(report_writes)
    for patch in (view.patches[s.id] for s in to_apply):
        view.warnings.extend(f"patch {patch.ID}: {w}" for w in patch.warnings)
    # A transform rendered for several files warns once.
    warnings = list(dict.fromkeys(view.warnings + _range_warnings(view, [s.id for s in to_apply])
                                  + _unknown_after_warnings(view, [s.id for s in to_apply])))
    return Plan(view.target, tuple(statuses), tuple(writes), view.state, new_state, tuple(warnings),
                tuple(s.id for s in to_apply), lost, tuple(switchable(view)))


def switchable(view: View) -> list[str]:
    """The loaded patches that take their pristine path under SGLANG_PATCHKIT_DISABLE."""
    from patchkit.base.constants import ENV_DISABLE

    return sorted(pid for pid, patch in view.patches.items()
                  if any(item.startswith(f"{ENV_DISABLE}=") for item in patch.RUNTIME_SWITCH))


def _runtime_intact(view: View) -> bool:
    """The runtime report's recorded files are on disk with their recorded bytes (or there are none
    to have: no state, or a release without SGLang's plugin system)."""
    from patchkit.store import runtime_plugin as runtime

    state = view.state
    if state is None or (not state.runtime and not runtime.has_plugin_system(view.target)):
        return True
    return bool(state.runtime) and all(view.target.read(rel) is not None and sha256(view.target.read(rel) or b"") == sha
                                       for rel, sha in state.runtime.items())


def _runtime_writes(view: View, state: State | None, force: bool) -> tuple[list[FileWrite], State | None]:
    """The writes that bring the runtime report's files (patchkit/store/runtime_plugin.py) to what a tree
    patched as `state` needs: written with its first patch, removed with its last, none on a
    release without SGLang's plugin system. A file there that patchkit did not write (neither
    absent nor its recorded bytes) is exit 4 unless `force` (it is patchkit's name)."""
    from patchkit.store import runtime_plugin as runtime

    target = view.target
    recorded = dict(view.state.runtime) if view.state else {}
    wanted = runtime.render(switchable(view)) if state is not None and runtime.has_plugin_system(target) else {}
    writes = []
    for rel in sorted(set(recorded) | set(wanted)):
        before = target.read(rel)
        after = wanted.get(rel)
        if before == after:
            continue
        if before is not None and sha256(before) != recorded.get(rel) and not force:
            raise DriftError(f"{target.path(rel)} is not the file patchkit wrote there (changed or put there outside "
                             "patchkit); nothing was written (remove it, or use --force)")
        writes.append(FileWrite(rel=rel, before=before, after=after, pristine=None))
    if state is None:
        return writes, None
    runtime_dir = None if target.runtime_root is None else str(target.runtime_root)
    new = {rel: sha256(data) for rel, data in wanted.items()}
    if new == state.runtime and runtime_dir == state.runtime_dir:
        return writes, state
    return writes, replace(state, runtime=new, runtime_dir=runtime_dir)


def _refuse_over_hand_applied(view: View, touched: set[str], assignment: dict[str, list[str]],
                              applied_before: list[str]) -> None:
    """A file that holds a diff patch applied by hand (captured, git apply) is not patched over:
    its backup would be the hand-edited bytes, so `revert` would leave that diff in place."""
    for pid in registry.patch_ids():
        if pid in applied_before or not registry.is_diff(pid):
            continue
        shared = sorted(touched & set(decide.hand_applied_files(view, pid) or ()))
        if shared:
            others = ", ".join(p for p in assignment[shared[0]] if p != pid)
            raise DriftError(f"{shared[0]} holds patch {pid}, applied by hand (patchkit did not write it); applying "
                             f"{others} there would keep that edit in the file's backup, so `revert` would not "
                             f"remove it; nothing was written (`{view.target.naming.command('revert', '--only', pid)}` "
                             "first, then apply both)")


def _refuse_half_a_hand_applied_stack(view: View, selected: list[str], by_hand: dict[str, dict[str, bytes]]) -> None:
    """Reverting one diff of a stack applied by hand takes its files back to the RECORD's bytes,
    so the other diffs' changes to those files would go too: refused, naming them."""
    if not by_hand:
        return
    state = view.state
    for pid in registry.patch_ids():
        if pid in selected or (state and pid in state.patches) or not registry.is_diff(pid):
            continue
        shared = sorted(set(decide.hand_applied_files(view, pid) or ()) & {rel for files in by_hand.values() for rel in files})
        if shared:
            chosen = next(p for p, files in by_hand.items() if shared[0] in files)
            raise DriftError(f"{shared[0]} holds patches {chosen} and {pid}, applied by hand as a stack; reverting "
                             f"{chosen} alone would take {pid}'s change too; nothing was written "
                             f"(`{view.target.naming.command('revert', '--only', chosen, '--only', pid)}` reverts both)")


def _with_digests(view: View, statuses: list[PatchStatus]) -> State | None:
    """The state with the patch digests a schema-1 state lacks, for the files whose bytes this
    run proved (by rendering, see `_identity_status`) to be what today's patch sources write:
    every patch on such a file has its current digest. The same state when there is nothing to add."""
    from patchkit.engine import identity

    state = view.state
    if state is None:
        return None
    proven = {rel for s in statuses if s.state == APPLIED for rel in s.files
              if rel in state.files and s.id in state.files[rel].patches}
    missing = {rel for rel in proven if set(state.files[rel].patches) - set(state.files[rel].digests)}
    if not missing:
        return state
    # Only the missing digests are added: one recorded already (another patch, maybe not judged
    # in this run) is kept as it is.
    files = {rel: replace(record, digests={**identity.digests(record.patches), **record.digests})
             if rel in missing else record for rel, record in state.files.items()}
    return replace(state, files=files)


def plan_revert(target: Target, only: tuple[str, ...] = (), force: bool = False) -> Plan:
    from patchkit.engine import hand_applied

    selected = registry.select(registry.patch_ids(), only)  # an unknown id is exit 2, whatever the state
    view = open_view(target)
    state = view.state
    # Diff patches applied by hand (captured, git apply): back to the release's bytes, proven by the RECORD.
    by_hand = {pid: found for pid in selected if not (state and pid in state.patches)
               for found in (decide.hand_applied_files(view, pid),) if found}
    _refuse_half_a_hand_applied_stack(view, selected, by_hand)
    # A stack applied by hand: each of its diffs gives a shared file the same RECORD bytes.
    undone = {rel: data for files in by_hand.values() for rel, data in sorted(files.items())}
    hand_writes = [FileWrite(rel=rel, before=view.read(rel), after=data, pristine=None) for rel, data in undone.items()]
    hand_statuses = [PatchStatus(pid, APPLIED, tuple(files), hand_applied.detail(target)) for pid, files in by_hand.items()]
    if state is None:
        return Plan(view.target, tuple(hand_statuses), tuple(hand_writes), None, None, tuple(view.warnings), tuple(by_hand))
    # --only names any known patch; those not applied here have nothing to revert.
    chosen = [pid for pid in selected if pid in state.patches] if only else list(state.patches)
    touched = {rel for pid in chosen for rel in state.files_of(pid)}
    drifted = sorted(rel for rel in touched if view.file_condition(rel) == "drifted")
    if drifted and not force:
        raise DriftError(f"{drifted[0]} was changed outside patchkit; reverting would lose that change (use --force, "
                         f"or `{target.naming.command('diff')}`)")
    assignment = {rel: [pid for pid in record.patches if pid not in chosen] for rel, record in state.files.items()}
    # Files that keep patches and did not change need no rendering (no libcst for a full revert).
    unchanged = {rel for rel in assignment if rel not in touched}
    try:
        writes, new_state, lost = _build(view, {rel: ids for rel, ids in assignment.items() if rel not in unchanged},
                                         [p for p in state.patches if p not in chosen], force)
    except PlanError as exc:
        # A patch made on top of a reverted one may not stand alone: name the pair.
        on_top = [(pid, below) for rel in touched for pid in assignment.get(rel, []) if pid in view.patches
                  for below in view.patches[pid].STACK_AFTER if below in chosen]
        if not on_top:
            raise
        pid, below = on_top[0]
        raise PlanError(f"{exc}; {pid} stacks on {below} and does not apply without it: revert both "
                        f"(`--only {below} --only {pid}`); nothing was written") from None
    if new_state is not None:
        new_state.files.update({rel: state.files[rel] for rel in unchanged})
    report_writes, new_state = _runtime_writes(view, new_state, force)
    writes.extend(report_writes)
    statuses = tuple(PatchStatus(pid, APPLIED, tuple(state.files_of(pid))) for pid in chosen)
    return Plan(view.target, (*statuses, *hand_statuses), (*writes, *hand_writes), state, new_state, tuple(view.warnings),
                (*chosen, *by_hand), lost)


def current_diff(target: Target) -> str:
    """Unified diff, pristine -> current, of every file patchkit changed."""
    state = state_mod.load(target.site)
    if state is None:
        return ""
    return "".join(
        unified_diff(rel, None if record.pristine is None else state_mod.read_backup(target.site, rel, record.pristine),
                     target.read(rel))
        for rel, record in sorted(state.files.items())
    )
