"""`patchkit doctor`: check an SGLang launch before it costs minutes.

The memory budget is computed the way the targeted release's own sizing code computes it
(`budget`, reading that code with `release`), the launch is parsed against that release's own
flags (`flags`, `launch`), and the known traps are checked (`rules`).
"""

from __future__ import annotations

import os
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any

from patchkit.doctor import advice, assumed
from patchkit.doctor import budget as budget_mod
from patchkit.doctor import gpu as gpu_mod
from patchkit.doctor import model as model_mod
from patchkit.doctor import model_classes
from patchkit.doctor import switches
from patchkit.doctor import release as release_mod
from patchkit.doctor import rules as rules_mod
from patchkit.doctor.context import Context
from patchkit.doctor.launch import Launch, parse, split_command
from patchkit.doctor.report import Finding, Report
from patchkit.doctor.run import Run
from patchkit.doctor.release_files import WheelFiles
from patchkit.base.errors import TargetError, UsageError
from patchkit.releases.pristine import WheelSource
from patchkit.store.naming import Naming
from patchkit.store.target import Target


def patch_states(target: Target | WheelSource) -> dict[str, str]:
    """Each patchkit patch's state in the targeted SGLang (what `patchkit status` reports); for a
    release read from its wheel, what the patches' probes say of its pristine code."""
    from patchkit.engine import decide, registry
    from patchkit.engine import view as view_mod

    if isinstance(target, WheelSource):
        source: Any = target  # code_view takes anything with `read` and `version`
        view = view_mod.code_view(source)
        return {pid: decide.evaluate(view, pid).state for pid in registry.patch_ids()}
    statuses, _warnings = decide.status(target)
    return {s.id: s.state for s in statuses}


def release_code(target: Target | WheelSource) -> release_mod.ReleaseCode:
    """The release's code: an installed tree's `sglang/` folder, or a wheel read member by member."""
    if isinstance(target, WheelSource):
        return release_mod.read(target.version, WheelFiles(target))
    return release_mod.read(target.version, target.package_dir)


SERVER_ARGS = "srt/server_args.py"  # where every release's ServerArgs builds its parser (relative to sglang/)


def _refuse_unread_flags(target: Target | WheelSource, release: release_mod.ReleaseCode) -> None:
    """A release whose flags, read from its code, lack --model-path (its server_args.py missing or not Python,
    or a pruned tree without the arg_groups/ modules that define it) is a TargetError naming what is wrong: a
    launch's --model-path was read as an unknown flag and reported "missing"."""
    if release.flags.has("--model-path"):
        return
    where = f"{target.wheel}: sglang/" if isinstance(target, WheelSource) else f"{target.package_dir}/"
    if release.tree(SERVER_ARGS) is not None:
        what = (f"{where}{SERVER_ARGS.rsplit('/', 1)[0]}/ defines no --model-path flag in server_args.py or "
                "arg_groups/ (a partial install)")
    else:
        what = f"{where}{SERVER_ARGS} is {'missing' if release.files.read(SERVER_ARGS) is None else 'not Python'}"
    raise TargetError(f"{what}: SGLang {release.version}'s launch flags cannot be read, so no launch can be "
                      "checked against them (reinstall SGLang)")


DRAFT_FLAG = "--speculative-draft-model-path"


def _draft(launch, model: model_mod.ModelFacts) -> model_mod.ModelFacts | None:
    path = launch.get("speculative_draft_model_path")
    if not path:
        return None
    if Path(str(path)).resolve() == model.path.resolve():
        return model
    if not Path(str(path)).is_dir() and model_mod.is_hub_id(str(path)):
        return None  # a hub id: nothing local to read (reported as draft-not-local)
    return model_mod.load(str(path), flag=DRAFT_FLAG)


def diagnose(target: Target | WheelSource, argv: list[str] | tuple[str, ...], overrides: gpu_mod.Overrides,
             probe: bool = True, environ: dict[str, str] | None = None,
             states: dict[str, str] | None = None, naming: Naming = Naming(),
             python: str | None = None) -> Report:
    """Everything `patchkit doctor` reports for one launch line against one SGLang; every fix it prints was
    applied to the launch and checked (patchkit/doctor/advice.py). `python`: the interpreter to build the
    release's model classes in (default: this one where it has torch)."""
    environ = dict(os.environ if environ is None else environ)
    line_env, args = split_command(argv)
    environ.update(line_env)  # `SGLANG_X=1 python -m sglang.launch_server ...`: the launch's own environment
    release = release_code(target)
    _refuse_unread_flags(target, release)
    status_note = None
    if states is None:
        try:
            states = patch_states(target)
        except TargetError as exc:  # e.g. a release patchkit has no patch set for
            states, status_note = {}, str(exc)
    states = switches.with_switches(states, environ)  # an applied patch SGLANG_PATCHKIT_DISABLE lists is off
    builder = model_classes.interpreter(python)
    with model_classes.release_tree(target) if builder else nullcontext(None) as tree:
        run = Run(target=target, release=release, overrides=overrides, probe=probe,
                  seen=gpu_mod.query() if probe else {}, environ=environ, states=states, status_note=status_note,
                  naming=naming, python=builder, tree=tree)
        def verified(line: list[str], fixed_states: dict[str, str], ranges: bool = True) -> Report:
            now = replace(run, states=fixed_states)
            return advice.verified(check(now, line, ranges=ranges), now, line, lambda again, states_again: check(
                replace(run, states=states_again), again, advise=False))

        def at_free(line: list[str], fixed_states: dict[str, str], free: float) -> Report:
            overrides = replace(run.overrides, gpu_free=free)
            return check(replace(run, states=fixed_states, overrides=overrides), line, advise=False)

        return advice.one_set(verified(args, run.states), run, args,
                              lambda line, fixed_states: verified(line, fixed_states, ranges=False), at_free)


def _classes(run: Run, args: list[str], gpu: gpu_mod.GpuFacts) -> model_classes.ClassWeights | model_classes.Unavailable:
    if run.python is None:
        return model_classes.Unavailable("this Python has no torch to build them in (pass --python, the serving "
                                         "interpreter)")
    return model_classes.build(run.python, run.tree, [args], gpu.sm, gpu.total_gib, gpu.count, run.release.flags)[0]


def check(run: Run, args: list[str], advise: bool = True, ranges: bool = True) -> Report:
    """One launch's report. `advise`: also find the recommended --mem-fraction-static and (`ranges`) the KV tokens
    over the free memory's range (off when the doctor checks a fix it is about to print: only the findings' levels
    are read then; the ranges off when it checks the fixes as one set: their fixes are read, not their words)."""
    release, environ, states = run.release, run.environ, run.states
    launch = parse(args, release.flags)
    model_path = launch.get("model_path")
    if not model_path:
        raise UsageError("the launch arguments have no --model-path (pass them after --)")
    model = model_mod.load(str(model_path))
    draft = _draft(launch, model)
    tp = launch.int_value("tp_size") or 1
    gpu = gpu_mod.facts(run.overrides, tp, probe=run.probe, pp_size=launch.int_value("pp_size") or 1,
                        custom_all_reduce=not launch.get("disable_custom_all_reduce", False),
                        buffers=release.allreduce_buffers(environ), seen=run.seen)

    classes = _classes(run, args, gpu)

    def evaluate(gpu_now: gpu_mod.GpuFacts, launch_now: Launch) -> budget_mod.Budget:
        found = budget_mod.compute(release, launch_now, model, draft, gpu_now, environ, states, classes)
        budget_mod.fill_non_static(found, release, launch_now, model, draft, gpu_now)
        return found

    budget = evaluate(gpu, launch)
    if advise and ranges and gpu.free_low_gib is not None and gpu.free_high_gib is not None:
        # The estimate's range carried through the budget: the fewest and most KV tokens the launch starts with.
        budget.kv_tokens_low, budget.kv_tokens_high = advice.kv_range(
            lambda free: budget_mod.compute(release, launch, model, draft, replace(gpu, free_gib=free), environ,
                                            states, classes), gpu.free_low_gib, gpu.free_high_gib, budget)
    if advise:
        budget.recommended_mem_fraction_static = advice.recommend_fraction(
            lambda fraction: evaluate(gpu, advice.with_fraction(launch, fraction)),
            cap=advice.INTEGRATED_CAP if gpu.integrated else advice.CAP)
    budget.assumed = assumed.terms(budget, gpu)
    ctx = Context(release=release, launch=launch, model=model, draft=draft, gpu=gpu, budget=budget,
                  patch_states=states, environ=environ, naming=run.naming)
    findings = rules_mod.run(ctx)
    target = run.target
    if gpu.free_gib is None:
        findings.append(Finding("gpu-facts-missing", "info",
                                "no nvidia-smi and no --gpu-memory/--gpu-free: the memory budget is not computed",
                                "pass doctor --gpu-memory and --gpu-free (the card's total and free GiB)"))
    if model.is_hybrid_gdn and release.sizing_file is None:
        findings.append(Finding("budget-approximate", "info",
                                f"SGLang {target.version} has no _calculate_mamba_ratio in "
                                f"{' or '.join(release_mod.SIZING_FILES)}: the state pool follows 0.5.14's steps",
                                "check it with patchkit doctor --version of a release from 0.5.14 on for figures "
                                "from its own code"))
    draft_path = launch.get("speculative_draft_model_path")
    if draft_path and draft is None:
        findings.append(Finding("draft-not-local", "info",
                                f"{DRAFT_FLAG} {draft_path} is a hub id: its weights and layers are not counted in "
                                f"the budget", f"fetch what doctor reads of it ({model_mod.fetch_command(str(draft_path))}) "
                                f"and pass DIR as {DRAFT_FLAG}"))
    if gpu.free_low_gib is not None and gpu.free_high_gib is not None and gpu.free_gib is not None:
        taken = ", ".join(f"{t.name} {t.low_gib:.2f}" + (f"-{t.high_gib:.2f}" if t.high_gib != t.low_gib else "")
                          for t in gpu.free_terms)
        kv = (f"; KV tokens {budget.kv_tokens_low:,}-{budget.kv_tokens_high:,} over that range"
              + (" (0: startup fails)" if budget.kv_tokens_low == 0 else "")
              if budget.kv_tokens_low is not None and budget.kv_tokens_high is not None else "")
        findings.append(Finding("gpu-free-estimated", "info",
                                f"free memory at weight load is estimated ({gpu.free_source}): {gpu.free_gib:.2f} GiB, "
                                f"{gpu.free_low_gib:.2f}-{gpu.free_high_gib:.2f} GiB after {taken} GiB{kv}",
                                "pass doctor --gpu-free with the \"avail mem\" SGLang logs at \"Load weight begin\""))
    if run.status_note is not None:
        findings.append(Finding("patch-status-unknown", "info", f"patch-needed not checked: {run.status_note}", ""))
    if budget.mem_fraction_source == "estimate" and budget.mem_fraction_static is not None:
        findings.append(Finding("mem-fraction-estimated", "info",
                                f"--mem-fraction-static is not set; its default is estimated as "
                                f"{budget.mem_fraction_static:.3f} (SGLang derives it from the GPU, chunked prefill "
                                f"and CUDA-graph sizes)"))
    return Report(
        sglang={"version": target.version, "path": release.files.label},
        gpu=gpu,
        budget=budget,
        findings=findings,
        model={"path": str(model.path), "architecture": model.arch, "weights_source": model.weights_source,
               "hybrid": model.is_hybrid_gdn},
    )
