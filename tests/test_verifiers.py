"""Verifiers on real benchmark records and realistic model outputs.

Math answers go through the real math-verify; code runs in the real sandbox. The ``open``
tests use :class:`podium.testing.ScriptedWorker` as a fake judge (unit tests: they check the
prompt sent and the score parsing, not a model's grading).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import textwrap
import time

import pytest

from podium.errors import ConfigError
from podium.eval.tasks import Task, load_tasks
from podium.eval.verifiers import (
    JUDGE_PASS_SCORE,
    MATH_HARD_TIMEOUT_S,
    Verdict,
    _MathProcess,
    build_program,
    function_under_test,
    parse_judge_score,
    verify,
)
from podium.testing import ScriptedWorker
from podium.workers.base import Call, Completion, Usage, WorkerSettings
from tests.conftest import SHARED_DATA, read_jsonl

BENCH = SHARED_DATA / "benchmarks"
GSM8K = load_tasks(BENCH / "gsm8k" / "test.jsonl")
HUMANEVAL = {t.id: t for t in load_tasks(BENCH / "humaneval" / "HumanEval.jsonl")}
HUMANEVAL_RAW = {r["task_id"]: r for r in read_jsonl(BENCH / "humaneval" / "HumanEval.jsonl")}
MBPP = {t.id: t for t in load_tasks(BENCH / "mbpp" / "mbpp.jsonl")}
MBPP_RAW = {f"mbpp/{r['task_id']}": r for r in read_jsonl(BENCH / "mbpp" / "mbpp.jsonl")}


def check(task: Task, answer: str, **kwargs: object) -> Verdict:
    return asyncio.run(verify(task, answer, **kwargs))  # type: ignore[arg-type]


def math(reference: str) -> Task:
    return Task(id="math/t", question="Compute it.", task_type="math", reference=reference)


def fenced(code: str) -> str:
    return f"Here is my solution:\n```python\n{code}\n```\nIt handles every case."


# --- math -------------------------------------------------------------------------------------


def test_gsm8k_janet_reference_is_18_and_a_worked_solution_matches() -> None:
    janet = GSM8K[0]
    assert janet.reference == "18"  # "#### 18" in the record
    answer = (
        "Janet's ducks lay 16 eggs a day. She eats 3 and bakes with 4, so 16 - 3 - 4 = 9 eggs are left.\n"
        "She sells each for $2, so she makes 9 * 2 = $18 every day.\nThe answer is 18."
    )
    assert check(janet, answer) == Verdict(1.0, True, True, "18", "18 equals the reference 18")


def test_gsm8k_a_wrong_computation_is_parsed_but_wrong() -> None:
    verdict = check(GSM8K[0], "She has 16 - 3 = 13 eggs left and makes 13 * 2 = 26 dollars. The answer is 26.")
    assert (verdict.correct, verdict.parsed, verdict.extracted, verdict.score) == (False, True, "26", 0.0)


def test_gsm8k_prose_without_marker_takes_the_last_number_with_currency_and_commas() -> None:
    josh = GSM8K[2]  # the house-flipping question, "#### 70000"
    assert josh.reference == "70000"
    answer = "The house is worth 80,000 + 120,000 = $200,000, so his profit is 200,000 - 130,000 = $70,000."
    assert check(josh, answer).extracted == "70000" and check(josh, answer).correct


def test_currency_decimals_and_thousands_separators_are_the_same_number() -> None:
    assert check(math("18"), "She makes $18.00 every day.").correct
    assert check(math("18"), "18.0").correct
    assert check(math("1234"), "#### 1,234").correct
    assert check(math("1234.5"), "**Answer:** $1,234.50").correct


def test_latex_fraction_equals_its_decimal_via_math_verify() -> None:
    verdict = check(math("0.5"), "The probability is \\boxed{\\frac{1}{2}}.")
    assert verdict.correct and verdict.extracted == "\\frac{1}{2}"


def test_boxed_wins_over_later_numbers() -> None:
    assert check(math("18"), "So $\\boxed{18}$ dollars; (check: 9 eggs times 2 is 18, not 20)").correct


def test_percent_equals_both_the_number_and_the_fraction() -> None:
    # Decision (module docstring): math-verify accepts 50% for 50 and for 0.5.
    assert check(math("50"), "The price went up by 50%.").correct
    assert check(math("0.5"), "The answer is 50 percent.").correct
    assert not check(math("50"), "The answer is 0.5").correct


def test_sign_matters() -> None:
    verdict = check(math("3"), "Solving gives x = -3.")
    assert verdict.parsed and not verdict.correct and verdict.extracted == "-3"
    assert check(math("-3"), "The answer is −3.").correct  # U+2212 minus


def test_the_marker_picks_the_stated_answer_not_the_last_number() -> None:
    stated = "The answer is $18 per day, and she would make 20 more dollars if the hens laid 10 more eggs."
    assert check(GSM8K[0], stated).extracted == "18"
    # Without a marker the last number is taken (documented), here the wrong one.
    unstated = "She makes $18 per day; with 10 more eggs she would make 20 more."
    assert check(GSM8K[0], unstated).extracted == "20" and not check(GSM8K[0], unstated).correct


def test_an_answer_without_a_number_is_not_parsed() -> None:
    for answer in ("", "I am not sure how to solve this.", "   \n"):
        verdict = check(GSM8K[0], answer)
        assert (verdict.parsed, verdict.correct, verdict.score, verdict.extracted) == (False, False, 0.0, None)


@pytest.mark.slow
def test_pathological_answers_return_quickly_and_wrong() -> None:
    for answer in ("\\boxed{9^{9^{9^{9}}}}", "9**9**9**9", "9" * 10_000, "\\boxed{(10^{100})!}"):
        started = time.perf_counter()
        verdict = check(GSM8K[0], answer)
        assert not verdict.correct and time.perf_counter() - started < MATH_HARD_TIMEOUT_S
    assert "too long" in check(GSM8K[0], "9" * 10_000).detail


@pytest.mark.slow
def test_a_comparison_past_the_hard_limit_kills_the_helper_and_the_next_one_works() -> None:
    # Private helper, tested directly: a tiny hard limit forces the kill path that real
    # answers reach only if math-verify's own timeouts fail.
    helper = _MathProcess(hard_timeout_s=0.3)
    try:
        helper.compare("1", "1")  # start the helper outside the timed part
        started = time.perf_counter()
        assert helper.compare("18", "9^{9^{9^{9}}}").status == "timeout"
        assert time.perf_counter() - started < 1.0
        assert helper.compare("18", "18.00").status == "equal"
    finally:
        helper.close()


def test_a_math_task_without_reference_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="reference"):
        check(Task(id="m", question="q", task_type="math"), "18")


# --- code -------------------------------------------------------------------------------------

HE0 = HUMANEVAL["HumanEval/0"]
HE0_RAW = HUMANEVAL_RAW["HumanEval/0"]


def test_humaneval0_canonical_solution_passes_its_check() -> None:
    verdict = check(HE0, fenced(HE0_RAW["prompt"] + HE0_RAW["canonical_solution"]))
    assert (verdict.correct, verdict.parsed, verdict.score, verdict.detail) == (True, True, 1.0, "all tests passed")


def test_humaneval0_wrong_solution_fails_its_asserts() -> None:
    wrong = "def has_close_elements(numbers, threshold):\n    return False"  # first check expects True
    verdict = check(HE0, fenced(wrong))
    assert (verdict.correct, verdict.parsed) == (False, True) and "AssertionError" in verdict.detail


def test_humaneval0_body_only_answer_is_placed_under_the_prompt() -> None:
    assert check(HE0, fenced(HE0_RAW["canonical_solution"])).correct  # 4-space indented body
    flat = "for i, a in enumerate(numbers):\n    for j, b in enumerate(numbers):\n"
    flat += "        if i != j and abs(a - b) < threshold:\n            return True\nreturn False"
    assert check(HE0, fenced(flat)).correct  # unindented body
    program = build_program(HE0, "return False")
    assert HE0_RAW["prompt"].rstrip("\n") + "\n    return False\n" in program


@pytest.mark.slow
def test_an_endless_loop_is_killed_at_the_timeout() -> None:
    started = time.perf_counter()
    verdict = check(
        HE0, fenced("def has_close_elements(numbers, threshold):\n    while True:\n        pass"), code_timeout_s=2
    )
    assert not verdict.correct and verdict.parsed and "timed out after 2 s" in verdict.detail
    assert time.perf_counter() - started < 4


def test_an_answer_without_code_is_not_parsed() -> None:
    verdict = check(HE0, "Compare every pair of numbers and return True when two are closer than the threshold.")
    assert (verdict.parsed, verdict.correct, verdict.extracted) == (False, False, None)
    assert not check(HE0, '```json\n{"answer": true}\n```').parsed


def test_unfenced_code_is_accepted_when_it_parses() -> None:
    assert check(HE0, HE0_RAW["prompt"] + HE0_RAW["canonical_solution"]).correct


def test_a_usage_example_after_the_solution_does_not_replace_it() -> None:
    answer = fenced(HE0_RAW["prompt"] + HE0_RAW["canonical_solution"])
    answer += "\nExample:\n```python\nprint(has_close_elements([1.0, 2.0], 0.5))\n```"
    assert check(HE0, answer).correct


def test_a_main_block_does_not_run_as_in_the_humaneval_harness() -> None:
    code = HE0_RAW["prompt"] + HE0_RAW["canonical_solution"] + "\nif __name__ == '__main__':\n    input()\n"
    assert check(HE0, fenced(code)).correct  # input() would raise EOFError on the empty stdin


def test_mbpp_canonical_code_passes_and_a_broken_one_fails() -> None:
    task = MBPP["mbpp/11"]
    assert task.split == "test"
    assert check(task, fenced(MBPP_RAW["mbpp/11"]["code"])).correct
    # Removes only the first occurrence: "hello" -> "helo", not "heo". (Removing every
    # occurrence would pass: MBPP's three asserts cannot tell it from the task.)
    broken = "def remove_Occ(s, ch):\n    return s.replace(ch, '', 1)"
    verdict = check(task, fenced(broken))
    assert not verdict.correct and verdict.parsed and "AssertionError" in verdict.detail


def test_the_function_under_test_is_found_in_every_mbpp_task() -> None:
    # MBPP names no entry point; the first function its asserts call is the one to look for,
    # and every canonical solution defines it (mbpp/126's is named like the builtin `sum`)
    def defines(code: str, name: str | None) -> bool:
        return re.search(rf"^\s*(def|class)\s+{name}\b|^{name}\s*=", code, re.MULTILINE) is not None

    missing = [tid for tid, t in MBPP.items() if not defines(MBPP_RAW[tid]["code"], function_under_test(t.tests or ""))]
    assert missing == [] and len(MBPP) == 974
    assert function_under_test("assert set(similar_elements((3, 4), (5, 4))) == set((4,))") == "similar_elements"
    assert function_under_test("assert math.isclose(volume_sphere(10), 4188.79, rel_tol=0.001)") == "volume_sphere"


def test_mbpp_answer_with_its_asserts_after_the_solution_is_scored_on_the_solution() -> None:
    # A real answer's shape (the local pipeline's final step on mbpp/166): a numbered list whose
    # items hold the function, then the task's own asserts, in fences indented with the items.
    # Taken as written, the last block fails alone (NameError) and indented (IndentationError).
    task = MBPP["mbpp/166"]

    def item(n: int, title: str, code: str) -> str:
        return f"{n}. {title}:\n" + textwrap.indent(f"```python\n{code}\n```", "   ") + "\n"

    answer = item(4, "Write the code", MBPP_RAW["mbpp/166"]["code"]) + item(5, "Test the code", task.tests or "")
    verdict = check(task, answer)
    assert verdict.correct and verdict.extracted is not None and verdict.extracted.startswith("def find_even_Pair")
    # a wrong solution in the same shape is still wrong: the asserts run against it
    wrong = "def find_even_Pair(A, N):\n    return 0"
    assert not check(task, fenced(wrong) + "\n" + fenced(task.tests or "")).correct


def test_mbpp_setup_code_runs_after_the_solution_that_defines_its_classes() -> None:
    task = MBPP["mbpp/367"]  # test_setup_code builds trees with the solution's Node class
    assert task.setup is not None and "Node(1)" in task.setup
    assert check(task, fenced(MBPP_RAW["mbpp/367"]["code"])).correct


# --- choice -----------------------------------------------------------------------------------

CHOICE = Task(id="c", question="q", task_type="choice", reference="b", choices=("2", "3", "4", "5"))


@pytest.mark.parametrize(
    "answer",
    [
        "Answer: B",
        "(B)",
        "**B**",
        "The correct answer is B.",
        "B",
        "B) 3 bolts",
        "It needs 2 + 1 = 3 bolts.\n\n**Answer:** (B)",
        "The answer is B because half of 2 is 1.",
        "A robe takes 2 bolts of blue fiber and half that much white, so (B) 3 bolts.",
    ],
)
def test_choice_letter_forms_are_recognised(answer: str) -> None:
    verdict = check(CHOICE, answer)
    assert (verdict.correct, verdict.extracted) == (True, "B")


@pytest.mark.parametrize(
    "answer",
    [
        "A robe takes 3 bolts in total.",  # the article, not option A
        "Answer: A robe takes 3 bolts.",
        "I think it is 3.",
        "A) 2\nB) 3\nC) 4\nD) 5",  # the options restated, none chosen
        "Answer: E",  # only four options
        "",
    ],
)
def test_no_letter_is_guessed_from_prose(answer: str) -> None:
    verdict = check(CHOICE, answer)
    assert (verdict.parsed, verdict.correct) == (False, False)


def test_a_different_letter_is_wrong() -> None:
    verdict = check(CHOICE, "The correct answer is (C).")
    assert (verdict.parsed, verdict.correct, verdict.extracted) == (True, False, "C")


# --- exact ------------------------------------------------------------------------------------

EXACT = Task(id="refund-17", question="How long is the refund window?", task_type="exact", reference="14 days")


@pytest.mark.parametrize(
    "answer",
    [
        "14 days",
        "  14   Days. ",
        "“14 days”",
        '"14 days".',
        "１４ days",
        "The window is two weeks.\nFinal answer: 14 days",
    ],
)
def test_exact_match_after_normalisation(answer: str) -> None:
    assert check(EXACT, answer).correct


def test_exact_mismatch_and_empty() -> None:
    verdict = check(EXACT, "Refunds are accepted within 14 days or 30 days for members.")
    assert (verdict.correct, verdict.parsed) == (False, True)
    assert not check(EXACT, "  ").parsed


# --- open -------------------------------------------------------------------------------------

OPEN = Task(id="o", question="Why is the sky blue?", task_type="open", reference="Rayleigh scattering")


class RecordingJudge(ScriptedWorker):
    """The scripted fake judge, also keeping the settings of each call."""

    def __init__(self, reply: str) -> None:
        super().__init__("judge", reply)
        self.seen_settings: list[WorkerSettings | None] = []

    async def complete(self, call: Call) -> Completion:
        self.seen_settings.append(call.settings)
        return await super().complete(call)


def test_judge_score_8_is_correct_and_the_prompt_carries_the_rubric() -> None:
    judge = RecordingJudge("Correct and well explained.\nScore: 8")
    verdict = check(OPEN, "Shorter wavelengths scatter more (Rayleigh scattering).", judge=judge)
    assert (verdict.score, verdict.correct, verdict.parsed) == (0.8, True, True)
    (messages,) = judge.calls
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    assert "Why is the sky blue?" in user and "Rayleigh scattering" in user and "Score: N" in user
    assert judge.seen_settings == [WorkerSettings(max_tokens=256, temperature=0.0)]


def test_judge_threshold_last_score_and_clamping() -> None:
    assert JUDGE_PASS_SCORE == 7
    assert check(OPEN, "x", judge=ScriptedWorker("j", "Score: 6")) == Verdict(
        0.6, False, True, "6", "judge j scored 6/10 (pass: 7)"
    )
    assert (
        check(OPEN, "x", judge=ScriptedWorker("j", "Score: 3\nOn reflection it is right.\n**Score:** 9")).score == 0.9
    )
    assert check(OPEN, "x", judge=ScriptedWorker("j", "Score: 15")).score == 1.0


def test_a_score_as_small_judges_write_it_is_read() -> None:
    """The 1.5B worker, asked for `Score: N`, ends with "Therefore, the score is 10." — a first
    user's judge labelling confirmed nothing because of it."""
    replies = {
        "It is right.\nTherefore, the score is 10.": 10,
        "The score is 8/10.": 8,
        "I would give it a score of 6 out of 10.": 6,
        "Rating: 4": 4,
        "Mostly right. 7/10": 7,
        "Score = 9": 9,
    }
    assert {reply: parse_judge_score(reply) for reply in replies} == replies
    for unscored in ("It scores 3 goals.", "The answer is 391.", "Score:\n8"):  # the grade must share the line
        assert parse_judge_score(unscored) is None


def test_a_judge_that_names_no_score_is_asked_once_more_for_the_number() -> None:
    """The 1.5B judge often ends after its reasons ("The answer is correct and complete. The
    product of 17 and 23 is indeed 391."): a model that continues text under a grammar writes
    the number after "Score: " on its own reply; any other judge gets a follow-up message."""

    class GrammarJudge(ScriptedWorker):
        def __init__(self) -> None:
            super().__init__("j", "The answer is correct and complete.")
            self.info = dataclasses.replace(self.info, grammar=True)
            self.continued: list[tuple[str | None, str | None]] = []

        async def complete(self, call: Call) -> Completion:
            if call.prefix is None:
                return await super().complete(call)
            self.continued.append((call.prefix, call.grammar))
            return Completion("8", Usage(1, 1), 0.0, 0.0)

    judge = GrammarJudge()
    assert check(OPEN, "Rayleigh scattering.", judge=judge).score == 0.8
    ((prefix, grammar),) = judge.continued
    assert prefix == "The answer is correct and complete.\nScore: " and grammar and '"10"' in grammar
    follow = ScriptedWorker("j", lambda m: "6" if m[-1]["role"] == "user" and len(m) > 2 else "Fine answer.")
    assert check(OPEN, "x", judge=follow).score == 0.6
    assert [m["role"] for m in follow.calls[1]] == ["system", "user", "assistant", "user"]
    assert follow.calls[1][2]["content"] == "Fine answer."  # its own reply, then the question for the number


def test_unreadable_judge_output_is_not_parsed() -> None:
    verdict = check(OPEN, "x", judge=ScriptedWorker("j", "Looks fine to me."))
    assert (verdict.parsed, verdict.correct, verdict.score) == (False, False, 0.0) and "Score" in verdict.detail


def test_open_without_judge_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="--judge NAME"):
        check(OPEN, "x")


def test_unknown_task_type_is_a_config_error() -> None:
    task = Task(id="u", question="q", task_type="essay", reference="r")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown task_type"):
        check(task, "x")


def test_huge_garbage_never_raises() -> None:
    garbage = "\x00{[(```" * 50_000
    for task in (GSM8K[0], HE0, CHOICE, EXACT):
        assert not check(task, garbage).correct
    assert json.dumps(check(GSM8K[0], garbage).__dict__)


def test_a_regression_set_entry_point_without_check_runs_the_plain_asserts() -> None:
    # A team's own code task names its function but writes plain asserts, no HumanEval `check`:
    # the asserts run against the answer (found by a fresh-user run: `check(square)` was appended
    # and every answer failed with a NameError)
    task = Task(
        id="sq", question="Write square(x).", task_type="code", tests="assert square(3) == 9", entry_point="square"
    )
    assert check(task, fenced("def square(x):\n    return x * x")).correct
    assert not check(task, fenced("def square(x):\n    return x + x")).correct
    assert "check(" not in build_program(task, "def square(x):\n    return x * x")
