"""Parse a `sglang.launch_server` argument list against one release's own flags.

An unknown or removed flag is recorded (the rules turn it into a finding); it never stops the
parse. Values are converted the way the release's parser converts them (int, float, str, lists).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from decimal import Decimal

from patchkit.doctor.flags import Flag, FlagTable

# Flags that earlier releases accepted and later ones dropped, with what replaces them. The
# replacement comes from the `new_flag=` of the release that still accepted the old spelling as a
# deprecated alias (tests check each entry against the real releases).
REMOVED_FLAGS = {
    "--mamba-scheduler-strategy": "--mamba-radix-cache-strategy",
    "--cuda-graph-max-bs": "--cuda-graph-max-bs-decode",
    "--cuda-graph-bs": "--cuda-graph-bs-decode",
    "--enable-gdn-replayssm-spec": "--enable-linear-replayssm-spec",
    "--nsa-prefill-backend": "--dsa-prefill-backend",
    "--nsa-decode-backend": "--dsa-decode-backend",
    "--disable-piecewise-cuda-graph": "--cuda-graph-backend-prefill=disabled",
    "--piecewise-cuda-graph-max-tokens": "--cuda-graph-max-bs-prefill",
}


# Values SGLang cannot run with although its parser takes them (sizes, counts, fractions): the
# parse records them as bad values (a `flag-value` error) and keeps the default for the budget.
AT_LEAST_ONE = ("tp_size", "pp_size", "dp_size", "max_running_requests", "context_length", "page_size",
                "max_total_tokens", "max_mamba_cache_size", "speculative_num_steps", "speculative_eagle_topk",
                "speculative_num_draft_tokens")
FRACTIONS = ("mem_fraction_static",)  # in (0, 1]
POSITIVE = ("mamba_full_memory_ratio",)


def out_of_range(dest: str, value: object) -> str | None:
    """Why `value` cannot work for `dest`, or None."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return "must be a finite number"
    if dest in AT_LEAST_ONE and value < 1:
        return "must be at least 1"
    if dest in FRACTIONS and not 0 < value <= 1:
        return "must be a fraction of the GPU memory, above 0 and at most 1"
    if dest in POSITIVE and value <= 0:
        return "must be above 0"
    return None


@dataclass(frozen=True)
class FlagUse:
    """One flag as written on the launch line."""

    written: str  # as the user wrote it (without `=value`)
    flag: Flag | None  # None: the release has no such flag
    values: tuple[str, ...] = ()


@dataclass
class Launch:
    """A parsed launch line: values by destination, and what did not parse."""

    argv: tuple[str, ...]
    values: dict[str, object] = field(default_factory=dict)
    explicit: set[str] = field(default_factory=set)  # dests the user set
    uses: list[FlagUse] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # flags this release does not know
    deprecated: list[tuple[str, str]] = field(default_factory=list)  # (flag, replacement)
    bad_values: list[tuple[str, str, str]] = field(default_factory=list)  # (flag, value, why)
    unlisted: list[tuple[str, str, tuple[str, ...]]] = field(default_factory=list)  # not a built-in choice
    stray: list[str] = field(default_factory=list)  # tokens that belong to no flag
    refused: list[tuple[str, str]] = field(default_factory=list)  # (flag, the parser's message): retired flags

    def get(self, dest: str, default: object = None) -> object:
        value = self.values.get(dest)
        return default if value is None else value

    def int_value(self, dest: str) -> int | None:
        """`dest`'s value as an int (a float is truncated, as int() does), or None when unset."""
        value = self.get(dest)
        if value is None:
            return None
        if isinstance(value, (int, float, str)):
            return int(value)
        raise TypeError(f"{dest} holds {value!r}, not a number")

    def float_value(self, dest: str) -> float | None:
        """`dest`'s value as a float, or None when unset."""
        value = self.get(dest)
        if value is None:
            return None
        if isinstance(value, (int, float, str)):
            return float(value)
        raise TypeError(f"{dest} holds {value!r}, not a number")

    def is_set(self, dest: str) -> bool:
        return dest in self.explicit


def _looks_like_flag(token: str) -> bool:
    if not token.startswith("-") or token == "-":
        return False
    try:
        float(token)
        return False  # a negative number is a value
    except ValueError:
        return True


_SI = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_IEC = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def human_int(raw: str) -> int:
    """SGLang's `human_readable_int` (utils/common.py): an integer, or a number with an SI suffix
    (k, M, G, T; decimals allowed) or an IEC suffix (Ki, Mi, Gi, Ti; whole numbers only)."""
    text = raw.strip()
    for suffix, factor in sorted({**_SI, **_IEC}.items(), key=lambda item: -len(item[0])):
        number = text.removesuffix(suffix)
        if number != text and number.replace(".", "", 1).isdigit() and not number.startswith("."):
            if "." in number and suffix in _IEC:
                raise ValueError(f"decimals are not allowed with {suffix}")
            return int(Decimal(number) * factor)
    return int(text)


_KIND_WORDS = {"human_int": "integer (SI/IEC suffixes allowed: 128k, 32Ki)", "json": "JSON value"}


def _convert(flag: Flag, raw: str) -> object:
    if flag.kind == "int":
        return int(raw)
    if flag.kind == "float":
        return float(raw)
    if flag.kind == "human_int":
        return human_int(raw)
    if flag.kind == "json":
        return json.loads(raw)
    return raw


def _resolve(table: FlagTable, name: str) -> Flag | None:
    """Exact name, else a unique prefix (argparse's `allow_abbrev`, on in SGLang's parser)."""
    flag = table.get(name)
    if flag is not None:
        return flag
    if not name.startswith("--"):
        return None
    matches = {flag.dest: flag for n, flag in table.by_name.items() if n.startswith(name)}
    return next(iter(matches.values())) if len(matches) == 1 else None


def split_command(argv: list[str] | tuple[str, ...]) -> tuple[dict[str, str], list[str]]:
    """A pasted command line -> (its leading `NAME=value` environment, the server arguments).

    Accepts the bare arguments, or a whole command: `[NAME=value ...] [env] python -m
    sglang.launch_server ARGS` or `[NAME=value ...] sglang serve ARGS`."""
    tokens = list(argv)
    env: dict[str, str] = {}
    i = 0
    while i < len(tokens):
        name, eq, value = tokens[i].partition("=")
        if tokens[i] == "env":
            i += 1
        elif eq and name.isidentifier() and not tokens[i].startswith("-"):
            env[name] = value
            i += 1
        else:
            break
    rest = tokens[i:]
    for j, token in enumerate(rest):
        if token.startswith("--"):
            break  # the server arguments have begun
        if token.endswith(("launch_server", "launch_server.py")) or (
                token == "serve" and j > 0 and rest[j - 1].endswith("sglang")):
            return env, rest[j + 1:]
    return env, rest


MODEL_PATH_SPELLINGS = ("--model-path", "--model")  # every release's `model_path` (`--model`: an alias)


def written_model_path(args: list[str]) -> str | None:
    """The model path a launch names, read without any release's flags (the last one given, as argparse keeps):
    what `bump --launch` checks before any download."""
    found = None
    for i, token in enumerate(args):
        name, eq, value = token.partition("=")
        if name in MODEL_PATH_SPELLINGS:
            found = value if eq else args[i + 1] if i + 1 < len(args) else found
    return found


@dataclass(frozen=True)
class Written:
    """One piece of the launch line as written: a flag (known or not) with the tokens that go with it,
    or a stray token that belongs to no flag."""

    tokens: tuple[str, ...]  # as written: the flag (perhaps `--flag=value`) and its values
    name: str | None = None  # the flag as written, without `=value`; None for a stray token
    flag: Flag | None = None  # None: not a flag of this release
    values: tuple[str, ...] = ()
    inline: str | None = None  # the value written as `--flag=value`


def written(argv: list[str] | tuple[str, ...], table: FlagTable) -> list[Written]:
    """The launch line cut into flags and their values the way the release's parser cuts it (an unknown
    flag takes the values that follow it, so they are not read as stray tokens)."""
    tokens = list(argv)
    found: list[Written] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        start = i
        i += 1
        if not _looks_like_flag(token):
            found.append(Written(tokens=(token,)))
            continue
        name, has_inline, inline = token.partition("=")
        flag = _resolve(table, name)
        values: list[str] = []
        if has_inline:
            values = [inline]
        elif flag is None or flag.takes_value:
            if flag is None or flag.nargs in ("+", "*"):
                while i < len(tokens) and not _looks_like_flag(tokens[i]):
                    values.append(tokens[i])
                    i += 1
            elif flag.nargs == "?":
                if i < len(tokens) and not _looks_like_flag(tokens[i]):
                    values.append(tokens[i])
                    i += 1
            elif i < len(tokens):
                values.append(tokens[i])
                i += 1
        found.append(Written(tokens=tuple(tokens[start:i]), name=name, flag=flag, values=tuple(values),
                             inline=inline if has_inline else None))
    return found


def changed(argv: list[str] | tuple[str, ...], table: FlagTable, set_args: tuple[str, ...] = (),
            remove: tuple[str, ...] = ()) -> list[str]:
    """The launch line with a fix applied: the flags in `remove` (as written, or any spelling of the same
    flag) and stray tokens named there dropped with their values; each flag of `set_args` (a flag followed
    by its values, as on a launch line) replacing every spelling of it already there, appended at the end."""
    setting = written(set_args, table)
    dests = {w.flag.dest for w in setting if w.flag is not None}
    names = {w.name for w in setting if w.flag is None}
    dropped = {w.flag.dest for w in written(remove, table) if w.flag is not None}
    kept: list[str] = []
    for piece in written(argv, table):
        if piece.name is None:
            if piece.tokens[0] in remove:
                continue
        elif (piece.flag is not None and piece.flag.dest in dests | dropped) or piece.name in remove \
                or piece.name in names:
            continue
        kept.extend(piece.tokens)
    return kept + list(set_args)


def parse(argv: list[str] | tuple[str, ...], table: FlagTable) -> Launch:
    launch = Launch(argv=tuple(argv))
    for known in table.by_name.values():
        if known.deprecated_for is None and known.dest not in launch.values:
            launch.values[known.dest] = known.default
    for piece in written(argv, table):
        if piece.name is None:
            launch.stray.append(piece.tokens[0])
            continue
        name, flag, has_inline, inline = piece.name, piece.flag, piece.inline is not None, piece.inline or ""
        if flag is None:
            launch.unknown.append(name)
            launch.uses.append(FlagUse(written=name, flag=None, values=piece.values))
            continue
        if flag.refusal is not None:
            launch.refused.append((name, flag.refusal))
        if flag.deprecated_for is not None:
            launch.deprecated.append((name, flag.deprecated_for))
        values = list(piece.values)
        launch.uses.append(FlagUse(written=name, flag=flag, values=tuple(values)))
        launch.explicit.add(flag.dest)
        if not flag.takes_value:
            if has_inline:  # argparse: "ignored explicit argument"
                launch.bad_values.append((name, inline, "takes no value (write the flag alone)"))
                continue
            if flag.const is not None:  # SGLang's DeprecatedAction stores nothing
                launch.values[flag.dest] = flag.const
            continue
        if not values and flag.nargs not in ("*", "?"):
            launch.bad_values.append((name, "", "expects a value"))
            continue
        if not values and flag.nargs == "?":  # argparse stores the flag's const
            launch.values[flag.dest] = flag.const
            continue
        try:
            converted = [_convert(flag, v) for v in values]
        except (ValueError, ArithmeticError):  # json.JSONDecodeError is a ValueError
            launch.bad_values.append((name, " ".join(values), f"is not a valid {_KIND_WORDS.get(flag.kind, flag.kind)}"))
            continue
        why = next((w for w in (out_of_range(flag.dest, v) for v in converted) if w), None)
        if why is not None:
            launch.bad_values.append((name, " ".join(values), why))
            continue
        if flag.choices and any(str(v) not in flag.choices for v in converted):
            if flag.choices_extensible:  # a plugin may have registered more choices
                launch.unlisted.append((name, " ".join(values), flag.choices))
            else:
                launch.bad_values.append((name, " ".join(values), "is not one of " + ", ".join(flag.choices)))
        if flag.const_always:  # the value only selects the flag (DeprecatedStoreConstAction)
            launch.values[flag.dest] = flag.const
            continue
        launch.values[flag.dest] = converted if flag.nargs in ("+", "*") else (
            converted[0] if converted else None)
    return launch
