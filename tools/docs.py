"""A tool's documentation as text for a prompt: everything native tool calling would send, compactly.

    - convert(value: number, unit?: "m" | "km" = "m") — Convert a length.
        value (number, required): the length to convert
        unit ("m" | "km", default "m"): the unit of value
"""
from __future__ import annotations

import difflib
import json
from typing import Any

from .text import shorten

MAX_DEPTH = 4  # nested objects are expanded this deep; deeper ones are shown as "object"
MAX_ENUM = 30  # enum values listed; beyond, the count
MAX_MESSAGE = 300  # characters of a message quoted in an error (a fault, a parameter's description, a name)
# values longer than MAX_GUESSED (given or allowed), or past the first MAX_CANDIDATES, are not guessed
MAX_GUESSED, MAX_CANDIDATES = 64, 1000


def describe(name: str, description: str, parameters: dict) -> str:
    """A signature line with the description, then a line per documented parameter (nested keys indented)."""
    text = " ".join(description.split())
    lines = [f"- {signature(name, parameters)}" + (f" — {text}" if text else "")]
    lines += _parameter_lines(parameters, indent="    ", depth=0)
    return "\n".join(lines)


def fault_note(error) -> str:
    """What follows the fault in a parameter's value (a jsonschema error): for a value outside an enum, the
    allowed one it most likely means, then the parameter's own description: ``'; did you mean "mi"? (unit:
    Unit of value: ...)'``. Empty for a fault in an object's keys, or where there is nothing to add."""
    if error.validator in ("required", "additionalProperties", "dependentRequired"):
        return ""
    if not isinstance(error.schema, dict):
        return ""
    guess = closest(error.instance, error.schema.get("enum")) if error.validator == "enum" else None
    hint = f'; did you mean {_json(guess)}?' if guess is not None else ""
    text = " ".join(str(error.schema.get("description", "")).split())
    keys = [part for part in error.path if isinstance(part, str)]
    if not (text and keys):
        return hint
    return f"{hint} ({keys[-1]}: {shorten(text, MAX_MESSAGE)})"


def closest(value: Any, allowed: Any) -> str | None:
    """The allowed string that ``value`` most likely means: the longest one it starts with ("miles" → "mi"),
    else the most similar; None when nothing is close."""
    if not isinstance(value, str) or not isinstance(allowed, list) or len(value) > MAX_GUESSED:
        return None
    words = {a.lower(): a for a in reversed(allowed[:MAX_CANDIDATES])
             if isinstance(a, str) and 0 < len(a) <= MAX_GUESSED}
    wanted = value.lower()
    prefixes = [word for word in words if len(word) > 1 and wanted.startswith(word)]
    if prefixes:
        return words[max(prefixes, key=len)]
    similar = difflib.get_close_matches(wanted, list(words), n=1, cutoff=0.6)
    return words[similar[0]] if similar else None


def signature(name: str, parameters: dict) -> str:
    """``name(a: string, b?: integer = 3)``: the parameters in order, `?` for optional ones."""
    properties = parameters.get("properties") or {}
    required = set(parameters.get("required") or [])
    shown = [f"{key}{'' if key in required else '?'}: {type_of(spec, values=False)}{_default(spec)}"
             for key, spec in properties.items()]
    return f"{name}({', '.join(shown)})"


def type_of(spec: Any, values: bool = True) -> str:
    """A short type: `string`, `"a" | "b"`, `integer[]`, `object`, `string | null`, `any`; with ``values``
    false, an enum shows as its type (its values are listed on the parameter's own line)."""
    if not isinstance(spec, dict):
        return "any"
    if "const" in spec:
        return _json(spec["const"])
    if isinstance(spec.get("enum"), list):
        if not values:
            return spec["type"] if isinstance(spec.get("type"), str) else "enum"
        return _one_of(spec["enum"])
    for union in ("anyOf", "oneOf"):
        if isinstance(spec.get(union), list):
            return " | ".join(type_of(option, values) for option in spec[union])
    kind = spec.get("type")
    if isinstance(kind, list):
        return " | ".join(map(str, kind))
    if kind == "array" or (kind is None and "items" in spec):
        items = spec.get("items")
        inner = type_of(items, values) if isinstance(items, dict) else "any"
        return f"({inner})[]" if " " in inner else f"{inner}[]"
    return str(kind) if kind else ("object" if "properties" in spec else "any")


def _parameter_lines(schema: dict, indent: str, depth: int) -> list[str]:
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    lines = []
    for key, spec in properties.items():
        spec = spec if isinstance(spec, dict) else {}
        notes = [type_of(spec, values=False), "required" if key in required else "optional"]
        if "default" in spec:
            notes.append(f"default {_json(spec['default'])}")
        limits, inner = _values(spec) + _limits(spec), _object_of(spec)
        text = " ".join(str(spec.get("description", "")).split())
        if not (text or limits or inner):  # the signature already says all there is
            continue
        lines.append(f"{indent}{key} ({', '.join(notes + limits)}){': ' + text if text else ''}")
        if inner and depth < MAX_DEPTH:
            lines += _parameter_lines(inner, indent + "    ", depth + 1)
    return lines


def _object_of(spec: dict) -> dict | None:
    """The object whose keys a parameter holds: itself, or the items of an array of objects."""
    if isinstance(spec.get("properties"), dict):
        return spec
    items = spec.get("items")
    if isinstance(items, dict) and isinstance(items.get("properties"), dict):
        return items
    return None


def _values(spec: dict) -> list[str]:
    """`one of "a" | "b"` for an enum, of the parameter or of its items."""
    items = spec["items"] if isinstance(spec.get("items"), dict) else {}
    for source, prefix in ((spec, "one of"), (items, "each one of")):
        if isinstance(source.get("enum"), list):
            return [f"{prefix} {_one_of(source['enum'])}"]
    return []


def _one_of(values: list) -> str:
    shown = " | ".join(_json(v) for v in values[:MAX_ENUM])
    return shown if len(values) <= MAX_ENUM else f"{shown} | ... ({len(values)} values)"


def _limits(spec: dict) -> list[str]:
    words = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<",
             "minLength": "min length", "maxLength": "max length", "minItems": "min items", "maxItems": "max items",
             "pattern": "pattern", "format": "format"}
    return [f"{words[key]} {_json(spec[key]) if key in ('pattern', 'format') else spec[key]}"
            for key in words if key in spec]


def _default(spec: Any) -> str:
    return f" = {_json(spec['default'])}" if isinstance(spec, dict) and "default" in spec else ""


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
