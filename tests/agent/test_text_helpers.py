"""Code-block extraction for models without tool calls, and secret redaction."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scrollctx.agent import extract_code_blocks, redact
from scrollctx.agent.backends import REDACTED


@pytest.mark.parametrize(
    ("text", "blocks"),
    [
        ("no code here", []),
        ("Look:\n```python\nprint(1)\n```\nDone.", ["print(1)"]),
        ("```py\nx = 1\n```", ["x = 1"]),
        ("```\nbare = True\n```", ["bare = True"]),
        ("```Python3\nprint('tag case')\n```", ["print('tag case')"]),
        ("```python title=cell.py\nprint(2)\n```", ["print(2)"]),
        ("```python\na = 1\n```\ntext\n```python\nb = 2\n```", ["a = 1", "b = 2"]),
        ("```bash\nls -la\n```\n```python\nok()\n```", ["ok()"]),
        ('```json\n{"a": 1}\n```', []),
        ("```python\n\n\n```", []),
        ("```python\n\n  indented()\n\n```", ["  indented()"]),
        (
            "I'll run:\n```python\nfor i in range(3):\n    print(i)",
            ["for i in range(3):\n    print(i)"],
        ),
        ("````python\ns = '''\n```\n'''\n````", ["s = '''\n```\n'''"]),
        ("   ```python\nthree_spaces()\n   ```", ["three_spaces()"]),
        ("    ```python\nfour_spaces_is_not_a_fence()\n    ```", []),
        ("inline ```python x``` is not a block", []),
        ("```python\nx = '```'\n```", ["x = '```'"]),
    ],
    ids=[
        "none",
        "python",
        "py",
        "bare",
        "tag-case",
        "info-string",
        "two-blocks",
        "skips-other-languages",
        "json-only",
        "blank-block",
        "keeps-indent",
        "unclosed-final-fence",
        "longer-fence",
        "indented-fence",
        "code-indent-not-fence",
        "inline",
        "backticks-in-code",
    ],
)
def test_extract_code_blocks(text: str, blocks: list[str]) -> None:
    assert extract_code_blocks(text) == blocks


_LINE_BREAKS = "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_LINE = st.text(alphabet=st.characters(blacklist_characters="`" + _LINE_BREAKS), min_size=1)


@given(st.lists(_LINE.filter(str.strip), min_size=1, max_size=4))
def test_fenced_lines_come_back_unchanged(lines: list[str]) -> None:
    code = "\n".join(lines)
    text = f"Here you go:\n```python\n{code}\n```\nAnything after."

    assert extract_code_blocks(text) == [code]


# -- redact -----------------------------------------------------------------------------------


def test_mappings_lose_secret_values_by_key_name_only() -> None:
    settings = {
        "api_key": "sk-live-abcdefghijklmnop",
        "model": "gpt-4o",
        "max_tokens": 100,
        "headers": {"Authorization": "Bearer abc.def.ghi", "X-Api-Key": "k-123", "Accept": "json"},
        "extra": [{"access_token": "tok"}, "plain"],
        "empty_secret": "",
    }

    assert redact(settings) == {
        "api_key": REDACTED,
        "model": "gpt-4o",
        "max_tokens": 100,
        "headers": {"Authorization": REDACTED, "X-Api-Key": REDACTED, "Accept": "json"},
        "extra": [{"access_token": REDACTED}, "plain"],
        "empty_secret": "",
    }
    assert settings["api_key"] == "sk-live-abcdefghijklmnop"  # the input is not modified


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Incorrect API key provided: sk-proj-AbCdEf123456",
            "Incorrect API key provided: [REDACTED]",
        ),
        ("key sk-ant-api03-xyzXYZ_0123456789 rejected", "key [REDACTED] rejected"),
        ("Authorization: Bearer eyJhbGciOi.payload.sig", "Authorization: Bearer [REDACTED]"),
        ("url?api_key=abc123&model=x", "url?api_key=[REDACTED]&model=x"),
        ('{"password": "hunter22"}', '{"password": "[REDACTED]"}'),
        ("max_tokens=100 prompt_tokens: 5", "max_tokens=100 prompt_tokens: 5"),
        ("nothing secret here", "nothing secret here"),
    ],
)
def test_free_text_loses_secret_shapes(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_other_values_pass_through() -> None:
    assert redact([1, None, ("sk-abcdefghijkl",)]) == [1, None, [REDACTED]]
