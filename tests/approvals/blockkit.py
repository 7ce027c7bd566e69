"""A compact JSON schema for the Block Kit blocks gpu-remedy posts (header, section, context, actions with buttons),
with the limits Slack's Block Kit reference states (docs: api.slack.com/reference/block-kit/blocks,
…/block-elements#button, …/composition-objects#text), as of 2026:

- a message: at most 50 blocks; block_id at most 255 characters
- header: text is plain_text, at most 150 characters
- section: text at most 3,000 characters (mrkdwn or plain_text); fields at most 10, 2,000 each
- context: 1–10 elements (text objects or images)
- actions: 1–25 elements; button text plain_text at most 75 characters, action_id at most 255, value at most
  2,000, url at most 3,000, style only "primary" or "danger"
- a text object: type plain_text or mrkdwn, text at least 1 character; emoji only on plain_text

Unknown keys are refused (additionalProperties: false), as Slack answers `invalid_blocks` for them."""

from __future__ import annotations

import jsonschema


def _text(max_len: int, kinds=("plain_text", "mrkdwn")) -> dict:
    return {"type": "object", "additionalProperties": False, "required": ["type", "text"],
            "properties": {"type": {"enum": list(kinds)}, "text": {"type": "string", "minLength": 1,
                                                                    "maxLength": max_len},
                           "emoji": {"type": "boolean"}, "verbatim": {"type": "boolean"}},
            "if": {"properties": {"type": {"const": "mrkdwn"}}}, "then": {"not": {"required": ["emoji"]}}}


BLOCK_ID = {"type": "string", "minLength": 1, "maxLength": 255}
BUTTON = {"type": "object", "additionalProperties": False, "required": ["type", "text"],
          "properties": {"type": {"const": "button"}, "text": _text(75, ("plain_text",)),
                         "action_id": {"type": "string", "minLength": 1, "maxLength": 255},
                         "value": {"type": "string", "maxLength": 2000},
                         "url": {"type": "string", "maxLength": 3000},
                         "style": {"enum": ["primary", "danger"]}}}
BLOCKS = {
    "header": {"required": ["type", "text"], "properties": {"type": {"const": "header"}, "text": _text(150, ("plain_text",)),
                                                             "block_id": BLOCK_ID}},
    "section": {"required": ["type"], "anyOf": [{"required": ["text"]}, {"required": ["fields"]}],
                "properties": {"type": {"const": "section"}, "text": _text(3000), "block_id": BLOCK_ID,
                               "fields": {"type": "array", "minItems": 1, "maxItems": 10, "items": _text(2000)}}},
    "context": {"required": ["type", "elements"],
                "properties": {"type": {"const": "context"}, "block_id": BLOCK_ID,
                               "elements": {"type": "array", "minItems": 1, "maxItems": 10, "items": _text(3000)}}},
    "actions": {"required": ["type", "elements"],
                "properties": {"type": {"const": "actions"}, "block_id": BLOCK_ID,
                               "elements": {"type": "array", "minItems": 1, "maxItems": 25, "items": BUTTON}}},
    "divider": {"required": ["type"], "properties": {"type": {"const": "divider"}, "block_id": BLOCK_ID}},
}
SCHEMA = {"type": "array", "minItems": 1, "maxItems": 50,
          "items": {"oneOf": [dict(kind, type="object", additionalProperties=False) for kind in BLOCKS.values()]}}


def problems(blocks: list[dict]) -> list[str]:
    """Each violation as one line with its path; empty when Slack would accept the blocks."""
    validator = jsonschema.Draft202012Validator(SCHEMA)
    out = []
    for err in validator.iter_errors(blocks):
        # oneOf hides which block kind failed: report the errors of the kind the block says it is
        if err.validator == "oneOf" and isinstance(err.instance, dict) and err.instance.get("type") in BLOCKS:
            kind = BLOCKS[err.instance["type"]]
            sub = jsonschema.Draft202012Validator(dict(kind, type="object", additionalProperties=False))
            out += [f"{'/'.join(map(str, err.absolute_path))}/{'/'.join(map(str, e.absolute_path))}: {e.message}"
                    for e in sub.iter_errors(err.instance)]
        else:
            out.append(f"{'/'.join(map(str, err.absolute_path))}: {err.message}")
    return out
