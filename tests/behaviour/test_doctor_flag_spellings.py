"""Every spelling each release's own parser accepts is read by the doctor as that parser reads it:
the real `ServerArgs.add_cli_args` parser and `from_cli_args` of each release 0.5.10-0.5.23 are
built in the behaviour environment (probe_flag_spellings.py), every option string of every action
is parsed there, with a value and as `--flag=value`, and the ServerArgs field it lands in and the
value it gets are compared with what the doctor's flag table and launch parse make of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchkit.doctor.flags import flag_table
from patchkit.doctor.launch import out_of_range, parse
from testing.behaviour import run_probe
from testing.releases import pristine

pytestmark = pytest.mark.behaviour

HERE = Path(__file__).parent
VERSIONS = [f"0.5.{minor}" for minor in range(10, 24)]
BASE = ["--model-path", "m"]


def _same(doctor_value: object, real: object) -> bool:
    if isinstance(real, float) or isinstance(doctor_value, float):
        return isinstance(doctor_value, (int, float)) and not isinstance(doctor_value, bool) \
            and float(doctor_value) == float(real)  # type: ignore[arg-type]
    return doctor_value == real


@pytest.mark.parametrize("version", VERSIONS)
def test_every_spelling_reads_as_the_release_parser_reads_it(version):
    site = pristine(version)
    real = run_probe(site, HERE / "probe_flag_spellings.py")["spellings"]
    table = flag_table(site / "sglang")
    problems = []
    checked_values = 0
    for case in real:
        argv = case["argv"]
        name = argv[0].partition("=")[0]
        flag = table.get(name)
        if flag is None:
            problems.append(f"{name}: not a flag of the doctor's table")
            continue
        if case.get("field") is not None and flag.dest != case["field"]:
            problems.append(f"{name}: lands in {case['field']}, the doctor reads it as {flag.dest}")
        if "takes_value" in case and flag.takes_value != case["takes_value"]:
            problems.append(f"{name}: takes a value {case['takes_value']}, the doctor says {flag.takes_value}")
        launch = parse(BASE + argv, table)
        if "refused" in case:
            if not (launch.bad_values or launch.refused):
                problems.append(f"{' '.join(argv)}: the parser refuses it ({case['refused']}), the doctor takes it")
            continue
        if "changed" not in case:
            continue
        if any(out_of_range(dest, value) for dest, value in case["changed"].items()):
            continue  # a value the parser takes and SGLang cannot run with (the doctor's flag-value error)
        if launch.unknown or launch.bad_values or launch.stray or launch.refused:
            problems.append(f"{' '.join(argv)}: the parser takes it, the doctor records "
                            f"{launch.unknown or launch.bad_values or launch.stray}")
            continue
        for dest, value in case["changed"].items():
            if isinstance(value, dict):  # a value JSON cannot hold (a parsed object): the field is checked above
                continue
            checked_values += 1
            if not _same(launch.get(dest), value):
                problems.append(f"{' '.join(argv)}: sets {dest}={value!r}, the doctor reads {launch.get(dest)!r}")
    assert not problems, f"{len(problems)} of {len(real)} spellings:\n" + "\n".join(problems[:40])
    assert checked_values > 300  # the probe really parsed the release's flags
