"""Prompt builders: turn an :class:`~tomrl.schema.Example` into chat messages and into the exact
text a model sees, rendered with the model's own chat template.

    from tomrl.prompts import PromptConfig, build_messages, render_prompt
    messages = build_messages(example, "paper_a")                   # [{"role": "system", …}, {"role": "user", …}]
    text = render_prompt(example, tokenizer)                        # chat template + "<think>" prefill
    text = render_prompt(example, tokenizer, PromptConfig("cot"))   # plain chain-of-thought baseline, no prefill

Styles
------
``paper_a``
    Paper A's prompt (ToM-RL, arXiv 2504.01698), word for word as released in
    bigai-ai/ToM-RL @ 2c92426 ``data/cleaned_tom/ToM_train_HiEx_hint.parquet`` (copied in
    /work/shared/data/tomrl_paper/tomrl_train_3200.jsonl; every one of its 3,200 training and
    8,060 test prompts has this form): the "hint" system prompt asking for
    ``<think> … </think><answer> … </answer>`` with the two assumptions, the user turn
    "Read the following story and answer the question. " + ``Story: …`` + ``Question: …``,
    and the assistant turn prefilled with ``<think>``. With a Qwen2.5 (ChatML) template the
    rendered text equals the released prompt byte for byte (tests check it with SmolLM2's
    ChatML template).
``cot``
    A plain chain-of-thought baseline for evaluation: no system prompt, no assumptions, no
    prefill; the user turn asks to think step by step and to end with the answer in
    ``<answer> … </answer>`` tags, so the one answer extractor reads it.
``hitom_mc`` / ``hitom_open``
    Hi-ToM's own chain-of-thought prompt (ying-hui-he/Hi-ToM_dataset, ``Hi-ToM_prompts/*/CoT``):
    its instruction line, ``Story:``, the question, ``Choices: A. …, B. …`` (multiple choice
    only, from ``example.choices``) and its four-assumption note. One departure: Hi-ToM asks
    for "the answer first, and then explain it"; tomrl asks for the reasoning first and the
    chosen container's name (not its letter) last in ``<answer>`` tags, so that the same
    extractor and the strict format apply.
``gsm8k``
    A math side check: the problem, then "Please reason step by step, and put your final answer
    within \\boxed{}." (the Qwen2.5 models' math prompt); no prefill. The checker reads the last
    ``\\boxed{}`` (else an answer tag) and compares numbers.

The prefill is the text the assistant turn starts with; it is appended after the chat
template's generation prompt, and the model's *completion* is what it generates after it.
Rewards must know it (``make_reward(name, prefill=...)``): Paper A's format rule counts the
prefilled ``<think>``. :class:`PromptConfig` (the ``prompt:`` block of training and evaluation
configs) names style and prefill; ``resolved_prefill`` gives the style's default for a missing one.

Templates without a system role (Gemma's raises "System role not supported") get the system
text at the top of the user turn instead; tokenizers without any chat template get a plain
"system, blank line, user" text. Both fallbacks are logged once per tokenizer class.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Literal, get_args

from tomrl.config import setting
from tomrl.io import BadInputError
from tomrl.schema import Example

PromptStyle = Literal["paper_a", "cot", "hitom_mc", "hitom_open", "gsm8k"]
PROMPT_STYLES: tuple[str, ...] = get_args(PromptStyle)
DEFAULT_PREFILLS: dict[str, str] = {"paper_a": "<think>"}  # every other style: no prefill

logger = logging.getLogger(__name__)

# Paper A's "hint" system prompt, exactly as in the released training and test prompts (trailing
# newline included: the released ChatML text has "\n<|im_end|>").
PAPER_A_SYSTEM_PROMPT = (
    "You are a helpful assistant. The assistant first thinks about the reasoning process in the mind "
    "and then provides the user with the answer. The reasoning process and answer are enclosed within "
    "<think> </think> and <answer> </answer> tags, respectively, i.e., <think> reasoning process here "
    "</think><answer> answer here </answer>. Now the user asks you to solve a theory of mind reasoning "
    "problem. After thinking, when you finally reach a conclusion, clearly state your answer within "
    "<answer> </answer> tags.\n"
    "Note: You should assume the following.\n"
    "(1) An agent witnesses everything and every movement before exiting a room.\n"
    "(2) An agent A can infer another agent B's mental state only if A and B have been in the same room, "
    "or have private or public interactions.\n"
)
# The released user turn: note the space before the first newline.
PAPER_A_USER_TEMPLATE = "Read the following story and answer the question. \nStory: {story}\nQuestion: {question}\n"

COT_USER_TEMPLATE = (
    "Read the following story and answer the question. Think step by step, then give your final answer "
    "(a single container or location name) inside <answer> </answer> tags at the end.\n"
    "Story:\n{story}\n"
    "Question: {question}\n"
)

# Hi-ToM's note, word for word from its released prompts (grammar included).
HITOM_NOTE = (
    "Note: You should assume the following. (1) An agent witnesses everything and every movements before "
    "exiting a location. (2) An agent A can infer another agent B's mental state only if A and B have been in "
    "the same location, or have private or public interactions. (3) Note that every agent tend to lie. What a "
    "character tells others doesn't affect his actual belief. An agent tend to trust a agent that exited the "
    "room later than himself. The exit order is known to all agents. (4) Agents in private communications know "
    "that others won't hear them, but they know that anyone can hear any public claims."
)
HITOM_MC_INSTRUCTION = (
    "Read the following story and answer the multiple-choice question. Think step-by-step, then give the answer: "
    "the name of the chosen container (for example green_drawer, not its letter) inside <answer> </answer> tags."
)
HITOM_OPEN_INSTRUCTION = (
    "Read the following story and answer the question. Think step-by-step, then give the answer: the name of "
    "the container (for example green_drawer) inside <answer> </answer> tags."
)
# The Qwen2.5 chat models' math convention (their GSM8K/MATH evaluations end the problem with this
# line and read the last \boxed{}); Paper A reports GSM8K for the same models but does not print its
# prompt, so this is tomrl's reading of "as Paper A ran it". The answer checker reads the last \boxed{}
# and falls back to an answer tag.
GSM8K_USER_TEMPLATE = "{problem}\nPlease reason step by step, and put your final answer within \\boxed{{}}."


@dataclass(frozen=True)
class PromptConfig:
    """How examples become prompts (embedded in training and evaluation configs)."""

    style: PromptStyle = setting("paper_a", help="prompt style: paper_a (Paper A's hint prompt, <think> prefill), cot (plain chain-of-thought baseline), hitom_mc, hitom_open, gsm8k")
    prefill: str | None = setting(None, help="text the assistant turn starts with; null = the style's default ('<think>' for paper_a, '' otherwise)")

    def __post_init__(self) -> None:
        _check_style(self.style)

    @property
    def resolved_prefill(self) -> str:
        """The prefill the prompt ends with: the one place a missing prefill becomes the style's default."""
        return DEFAULT_PREFILLS.get(self.style, "") if self.prefill is None else self.prefill


def _check_style(style: str) -> None:
    if style not in PROMPT_STYLES:
        raise ValueError(f"unknown prompt style {style!r}; known: {', '.join(PROMPT_STYLES)}")


CHOICE_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def format_choices(choices: list[str]) -> str:
    """Hi-ToM's option list: ``A. blue_drawer, B. green_crate, …``."""
    if len(choices) > len(CHOICE_LETTERS):
        raise ValueError(f"{len(choices)} choices: at most {len(CHOICE_LETTERS)} can be lettered")
    return ", ".join(f"{CHOICE_LETTERS[i]}. {choice}" for i, choice in enumerate(choices))


def _prompt_problem(example: Example, style: str) -> str | None:
    """Why ``style`` cannot prompt ``example`` (``hitom_mc`` lists its choices: it needs 1 to 26), or None."""
    if style != "hitom_mc":
        return None
    if not example.choices:
        return "field 'choices': prompt style 'hitom_mc' needs choices, and this example has none"
    if len(example.choices) > len(CHOICE_LETTERS):
        return (f"field 'choices': prompt style 'hitom_mc' needs choices it can letter (at most {len(CHOICE_LETTERS)}), "
                f"and this example has {len(example.choices)}")
    return None


def check_prompts(examples: Iterable[Example], style: str, where: Callable[[Example], str], key: str = "prompt.style") -> None:
    """Check, before any model is loaded, that ``style`` can prompt every one of ``examples``: else one
    :class:`~tomrl.io.BadInputError` naming the first that it cannot (``where(example)``: its file and line or
    id) and the fix (``key``: the setting or flag that chose the style)."""
    for example in examples:
        problem = _prompt_problem(example, style)
        if problem is not None:
            raise BadInputError(f"{where(example)}: {problem}; give data with 1 to {len(CHOICE_LETTERS)} choices per question, "
                                f"or another prompt style with {key} "
                                "(hitom_open asks the same question without them)")


def build_messages(example: Example, style: PromptStyle = "paper_a") -> list[dict[str, str]]:
    """The chat messages for ``example`` in ``style`` (without the prefill)."""
    _check_style(style)
    if style == "paper_a":
        # Story and question go in untouched, as in the release (ToMi questions there start with a space).
        user = PAPER_A_USER_TEMPLATE.format(story=example.story, question=example.question)
        return [{"role": "system", "content": PAPER_A_SYSTEM_PROMPT}, {"role": "user", "content": user}]
    story, question = example.story.strip("\n"), example.question.strip()
    if style == "gsm8k":
        return [{"role": "user", "content": GSM8K_USER_TEMPLATE.format(problem=example.story)}]
    if style == "cot":
        return [{"role": "user", "content": COT_USER_TEMPLATE.format(story=story, question=question)}]
    if style == "hitom_mc":
        check_prompts([example], style, lambda e: f"example {e.id!r}")
        body = f"{HITOM_MC_INSTRUCTION}\nStory:\n{story}\nQuestion: {question}\nChoices: {format_choices(example.choices)}\n\n{HITOM_NOTE}\n"
    else:
        body = f"{HITOM_OPEN_INSTRUCTION}\nStory:\n{story}\nQuestion: {question}\n\n{HITOM_NOTE}\n"
    return [{"role": "user", "content": body}]


def render_prompt(example: Example, tokenizer: Any, prompt: PromptConfig = PromptConfig()) -> str:
    """The full prompt text: the model's chat template (generation prompt added) + the prefill."""
    return render_messages(build_messages(example, prompt.style), tokenizer) + prompt.resolved_prefill


def render_messages(messages: list[dict[str, str]], tokenizer: Any) -> str:
    """Apply ``tokenizer``'s chat template with a generation prompt, handling missing system roles."""
    if getattr(tokenizer, "chat_template", None) is None:
        _warn_once(tokenizer, "has no chat template; using plain 'system, blank line, user' text")
        return "\n\n".join(m["content"].rstrip("\n") for m in messages) + "\n\n"
    try:
        return _apply(tokenizer, messages)
    except Exception as error:  # jinja2's TemplateError from raise_exception(), or a KeyError/TypeError
        if not messages or messages[0]["role"] != "system":
            raise
        _warn_once(tokenizer, f"chat template rejected the system role ({error}); system text moved into the user turn")
        return _apply(tokenizer, merge_system_into_user(messages))


def merge_system_into_user(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """For templates without a system role: the system text opens the first user turn."""
    system, rest = messages[0]["content"], [dict(m) for m in messages[1:]]
    for message in rest:
        if message["role"] == "user":
            message["content"] = system.rstrip("\n") + "\n\n" + message["content"]
            return rest
    return [{"role": "user", "content": system}, *rest]


def _apply(tokenizer: Any, messages: list[dict[str, str]]) -> str:
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    if not isinstance(text, str):  # some versions return a list for a single conversation
        text = text[0]
    return text


_WARNED: set[str] = set()


def _warn_once(tokenizer: Any, message: str) -> None:
    key = f"{type(tokenizer).__name__}:{message[:40]}"
    if key not in _WARNED:
        _WARNED.add(key)
        logger.warning("tokenizer %s %s", getattr(tokenizer, "name_or_path", type(tokenizer).__name__), message)
