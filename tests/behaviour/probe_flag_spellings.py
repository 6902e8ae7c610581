"""Build a release's real argument parser and ServerArgs.from_cli_args, and print, for every
spelling the parser accepts, which ServerArgs field it sets and to what."""

import sys

sys.dont_write_bytecode = True  # the pristine release in the tests' cache stays as it is

import argparse  # noqa: E402
import json  # noqa: E402

from sglang.srt.server_args import ServerArgs  # noqa: E402

ServerArgs.__post_init__ = lambda self: None  # only the field values from_cli_args gives, no resolution

BASE = ["--model-path", "m"]


class Refused(Exception):
    pass


def _error(self, message):
    raise Refused(message)


def samples(action):
    """Values to try, in order: a choice, else a whole number, a fraction, a word."""
    if action.choices:  # one that differs from the default, so the change shows
        return [str(c) for c in action.choices if c != action.default][-1:] or [str(list(action.choices)[0])]
    return ["3", "0.5", "x"]


def field_values(args):
    try:
        import msgspec.structs

        names = [f.name for f in msgspec.structs.fields(type(args))]
    except (ImportError, TypeError):
        import dataclasses

        names = [f.name for f in dataclasses.fields(args)]
    return {name: getattr(args, name) for name in names}


PARSER = argparse.ArgumentParser()
ServerArgs.add_cli_args(PARSER)
PARSER.error = _error.__get__(PARSER)


def fields(argv):
    namespace = PARSER.parse_args(BASE + argv)
    return field_values(ServerArgs.from_cli_args(namespace))


def _accepts(argv):
    try:
        PARSER.parse_args(BASE + argv)
    except (Refused, SystemExit, Exception):
        return False
    return True


def plain(value):
    """A JSON value for what JSON can hold as it is; the repr (marked) for anything else."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, (bool, int, float, str)) for v in value):
        return list(value)
    return {"repr": repr(value)}


class Sentinel:
    pass


def field_of(action):
    """The ServerArgs field the parser's `dest` ends up in, through from_cli_args (None: none)."""
    namespace = PARSER.parse_args(BASE)
    marker = Sentinel()
    setattr(namespace, action.dest, marker)
    found = [name for name, value in field_values(ServerArgs.from_cli_args(namespace)).items() if value is marker]
    return found[0] if found else None


baseline = fields([])
spellings = []
for action in PARSER._actions:
    if isinstance(action, argparse._HelpAction):
        continue
    field = field_of(action)
    for option in action.option_strings:
        if action.nargs == 0:
            cases = [[option], [f"{option}=true"]]
        else:
            value = next((v for v in samples(action) if _accepts([option, v])), None)
            if value is None:
                spellings.append({"argv": [option], "field": field, "no_sample": True})
                continue
            cases = [[option, value], [f"{option}={value}"]]
        for argv in cases:
            try:
                got = fields(argv)
            except (Refused, SystemExit) as exc:
                spellings.append({"argv": argv, "field": field, "refused": str(exc)})
                continue
            except Exception as exc:  # a type function or from_cli_args that fails on the sample
                spellings.append({"argv": argv, "field": field, "failed": f"{type(exc).__name__}: {exc}"})
                continue
            changed = {k: plain(v) for k, v in got.items() if plain(v) != plain(baseline.get(k))}
            spellings.append({"argv": argv, "field": field, "takes_value": action.nargs != 0, "changed": changed})
print(json.dumps({"spellings": spellings}))
