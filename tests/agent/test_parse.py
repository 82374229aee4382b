import pytest

from agent.parse import ParseError, extract_candidate, parse_judge

GOOD = "import torch\nclass ModelNew(torch.nn.Module):\n    pass\n"


def test_last_complete_block_defining_model_new_wins() -> None:
    reply = (f"Draft:\n```python\n{GOOD.replace('pass', 'x = 1')}```\nHelper:\n```python\ndef helper(): pass\n```\n"
             f"Final:\n```python\n{GOOD}```\nNotes ```cpp\nint x;\n```")
    assert extract_candidate(reply) == GOOD


def test_unfenced_file_and_missing_code() -> None:
    assert extract_candidate(GOOD) == GOOD
    with pytest.raises(ParseError, match="ModelNew"):
        extract_candidate("I cannot help with that.")
    with pytest.raises(ParseError):
        extract_candidate("```python\nprint('no class')\n```")


def test_unterminated_block_is_not_taken() -> None:
    with pytest.raises(ParseError):
        extract_candidate(f"```python\n{GOOD}")  # cut off by max_tokens


@pytest.mark.parametrize("reply", [
    '{"diagnosis": "d", "change": "c"}',
    'Sure! ```json\n{"diagnosis": "d", "change": "c", "expected_effect": "e"}\n``` done',
    'My view: {"Diagnosis": "d", "Change": "c"} -- hope it helps {"unrelated": 1}',
])
def test_judge_json_in_many_wrappings(reply: str) -> None:
    advice = parse_judge(reply)
    assert (advice.diagnosis, advice.change) == ("d", "c")


def test_judge_fallbacks() -> None:
    assert parse_judge("diagnosis - slow\nchange - faster").change == "faster"
    for unusable in ("Use shared memory tiles.", "```python\nclass ModelNew: ...\n```", '[{"diagnosis": "d"}]',
                     '{"problem": "slow", "fix": "tile it"}', '{"diagnosis": ["d"], "change": "c"}', "   "):
        with pytest.raises(ParseError, match="JSON object|empty"):
            parse_judge(unusable)
