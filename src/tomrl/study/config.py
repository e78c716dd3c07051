"""The typed config of ``tomrl study``: a declared grid of training runs and the tasks they are tested on.

    from tomrl.config import load_config
    from tomrl.study.config import StudyConfig
    cfg = load_config(StudyConfig, "configs/study/smoke.yaml", ["seeds=[0, 1]"])

or ``tomrl study --config configs/study/cpu_mini.yaml`` (``tomrl study --help`` lists every key).

A study crosses data mixtures × arms × seeds (× models). Every cell trains from the same base
training config (``train_config`` + ``train_overrides``): the mixture replaces its ``data:`` block,
the arm decides how the ``updates`` optimizer updates are spent (:mod:`tomrl.study.arms`), the
seed and the model replace ``seed`` and ``model``. Each finished run is then evaluated on
``tasks``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from tomrl.config import check_seed, setting
from tomrl.evaluation.benchmarks import check_names
from tomrl.rewards.fidelity import FidelityOptions
from tomrl.training.config import DataConfig

ArmName = Literal["grpo", "reinforce_pp", "sft", "rft", "answer_only", "fidelity"]
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*(_[A-Za-z0-9.-]+)*$")  # "__" separates the parts of a cell id


def _check_name(kind: str, name: str) -> None:
    if not NAME_PATTERN.match(name):
        raise ValueError(f"{kind} name {name!r}: use letters, digits, '.', '-' and single '_' (the cell id joins parts with '__')")


@dataclass(frozen=True, kw_only=True)
class MixtureSpec:
    name: str = setting(help="short name of the mixture: the first part of each cell id (letters, digits, '.', '-', '_')")
    description: str = setting("", help="what the mixture trains on, for the report")
    recipe: str | None = setting(None, help="a data recipe (configs/recipes name or file), e.g. paper-b-hitom; or give data")
    data: DataConfig | None = setting(
        None, help="a training data block (tomrl train's data: generate + generate_overrides, train_files …) replacing the base config's"
    )
    updates: int | None = setting(
        None, help="optimizer updates of every arm on this mixture (e.g. Paper B's 10 epochs of its size); null = the study's updates"
    )

    def __post_init__(self) -> None:
        _check_name("mixture", self.name)
        if (self.recipe is None) == (self.data is None):
            raise ValueError(f"mixture {self.name!r}: give recipe or data, one of the two")
        if self.updates is not None and self.updates < 1:
            raise ValueError(f"mixture {self.name!r}: updates must be >= 1 or null, got {self.updates}")

    @property
    def data_config(self) -> DataConfig:
        """The ``data:`` block of this mixture's runs."""
        return self.data if self.data is not None else DataConfig(recipe=self.recipe)


@dataclass(frozen=True, kw_only=True)
class TaskSpec:
    name: str = setting(help="short name of the evaluation task (a column of the generalization matrix)")
    held_out: bool = setting(help="true when no mixture of the study trains on this task's distribution (marked in the report)")
    benchmark: str | None = setting(
        None, help="what tomrl eval evaluates: a benchmark name (tomrl eval --list) or a unified-schema .jsonl file; or give generate"
    )
    generate: str | None = setting(
        None,
        help="instead of benchmark: generate the task's questions once into STUDY_DIR/tasks/NAME.jsonl with tomrl's generator "
        "('default' or a configs/generate YAML file) and generate_overrides",
    )
    generate_overrides: list[str] = setting(default_factory=list, help="key=value overrides of the generator config, e.g. ['n=40', 'orders=[2]']")

    def __post_init__(self) -> None:
        _check_name("task", self.name)
        if (self.benchmark is None) == (self.generate is None):
            raise ValueError(f"task {self.name!r}: give benchmark or generate, one of the two")
        if self.benchmark is not None:
            check_names([self.benchmark])  # a typo fails at load, with "did you mean"
        if self.generate_overrides and self.generate is None:
            raise ValueError(f"task {self.name!r}: generate_overrides need generate")


@dataclass(frozen=True)
class SupervisedArmSettings:
    learning_rate: float | None = setting(
        None, help="learning rate of the sft and rft arms' updates; null = the training config's warm_start.learning_rate"
    )

    def __post_init__(self) -> None:
        if self.learning_rate is not None and self.learning_rate <= 0:
            raise ValueError(f"sft.learning_rate must be > 0 or null, got {self.learning_rate}")


@dataclass(frozen=True)
class RejectionSamplingSettings:
    samples_per_prompt: int | None = setting(
        None, help="completions sampled per training prompt before filtering; null = the training config's rollouts_per_prompt (what RL samples)"
    )
    temperature: float | None = setting(None, help="sampling temperature; null = the training config's temperature")
    top_p: float | None = setting(None, help="sampling top-p; null = the training config's top_p")
    scheme: Literal["strict", "paper", "paper_eval", "paper_b"] = setting(
        "strict", help="answer scheme of tomrl.rewards.answer that decides which completions are correct (kept)"
    )
    batch_size: int = setting(64, help="prompts decoded together while sampling")

    def __post_init__(self) -> None:
        if self.samples_per_prompt is not None and self.samples_per_prompt < 1:
            raise ValueError(f"rft.samples_per_prompt must be >= 1 or null, got {self.samples_per_prompt}")
        if self.temperature is not None and self.temperature <= 0:
            raise ValueError("rft.temperature must be > 0 (greedy sampling gives k identical completions) or null")
        if self.batch_size < 1:
            raise ValueError(f"rft.batch_size must be >= 1, got {self.batch_size}")


@dataclass(frozen=True)
class AnswerOnlySettings:
    algorithm: Literal["grpo", "reinforce_pp"] = setting("grpo", help="RL algorithm of the answer_only arm")
    prefill: str = setting(
        "<think> </think><answer>",
        help="the assistant turn starts with this text: an empty think block and an open answer tag, so the policy writes "
        "only the answer (the answer checker counts the prefill's tags, so the strict format still holds)",
    )


@dataclass(frozen=True)
class FidelityArmSettings:
    algorithm: Literal["grpo", "reinforce_pp"] = setting("grpo", help="RL algorithm of the fidelity arm")
    weight: float = setting(
        0.5,
        help="weight of the fidelity reward (-1 ... 1) added to the training config's rewards (their own weights: reward_weights, "
        "or 1 each; Paper A's answer reward spans -3 ... 3)",
    )
    options: FidelityOptions = setting(
        default_factory=FidelityOptions, help="options of the fidelity reward (its reward_options in the arm's training config)"
    )

    def __post_init__(self) -> None:
        if self.weight <= 0:
            raise ValueError(f"fidelity.weight must be > 0 (the arm is RL with the fidelity reward added), got {self.weight}")


@dataclass(frozen=True)
class StudyEvalSettings:
    limit: int | None = setting(None, help="questions per task (spread over orders, seeded; the same questions for every model); null = all")
    max_new_tokens: int = setting(512, help="token budget of each evaluation answer")
    temperature: float = setting(0.0, help="sampling temperature of evaluation answers (0 = greedy)")
    stop_at_answer: bool = setting(False, help="speed option: end each answer at its first '</answer>' (off: generate to EOS, as the papers)")
    seed: int = setting(0, help="seed of the question selection and of sampling (the same for every model)")
    batch_size: int = setting(64, help="prompts decoded together")
    engine: Literal["hf", "vllm"] = setting("hf", help="generation engine of the evaluations")
    checkpoint_every: int = setting(
        0, help="also keep and evaluate each run's model every K optimizer updates (step-K), for in-distribution vs held-out curves; 0 = final only"
    )

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"eval.limit must be >= 1 or null, got {self.limit}")
        if self.max_new_tokens < 1 or self.batch_size < 1 or self.temperature < 0 or self.checkpoint_every < 0:
            raise ValueError("eval.max_new_tokens and eval.batch_size must be >= 1, eval.temperature and eval.checkpoint_every >= 0")


@dataclass(frozen=True, kw_only=True)
class StudyConfig:
    name: str = setting(help="name of the study (the report's title)")
    description: str = setting("", help="what the study asks, for the report")
    out_dir: str = setting(help="the study folder: study.yaml, grid.json, runs/, evals/, report/")
    train_config: str = setting(
        help="base training config of every cell (configs/train YAML; relative paths are tried from the working folder, then the repo)"
    )
    train_overrides: list[str] = setting(default_factory=list, help="key=value overrides of the base training config, for every cell")
    models: list[str] = setting(default_factory=list, help="models to train (a grid axis); empty = the training config's model")
    mixtures: list[MixtureSpec] = setting(help="training data mixtures (a grid axis)")
    arms: list[ArmName] = setting(
        help="training arms at matched budget (a grid axis): grpo, reinforce_pp (RL), sft (supervised on oracle traces), "
        "rft (rejection-sampling fine-tuning on the model's own correct completions), answer_only (RL, answer without reasoning), "
        "fidelity (RL with the reasoning-fidelity reward added to the answer reward: fidelity.weight, fidelity.options)"
    )
    seeds: list[int] = setting(default_factory=lambda: [0], help="training seeds (a grid axis)")
    updates: int = setting(
        help="optimizer updates of every arm (its max_steps; a mixture's own updates replace it); each update uses prompts_per_step "
        "training stories, so all arms see the same stories in the same number of updates"
    )
    arm_overrides: dict[str, list[str]] = setting(
        default_factory=dict, help="extra key=value overrides of the training config per arm, e.g. {grpo: ['loss_type=grpo']}"
    )
    sft: SupervisedArmSettings = setting(default_factory=SupervisedArmSettings, help="the sft and rft arms' supervised updates")
    rft: RejectionSamplingSettings = setting(default_factory=RejectionSamplingSettings, help="the rft arm's sampling and filtering")
    answer_only: AnswerOnlySettings = setting(default_factory=AnswerOnlySettings, help="the answer_only arm")
    fidelity: FidelityArmSettings = setting(default_factory=FidelityArmSettings, help="the fidelity arm")
    tasks: list[TaskSpec] = setting(help="evaluation tasks of every finished run and of each base model")
    eval: StudyEvalSettings = setting(default_factory=StudyEvalSettings, help="how the tasks are evaluated")
    report: bool = setting(True, help="write STUDY_DIR/report/ (tomrl.analysis.study_report) when the grid is finished")
    keep_checkpoints: bool = setting(
        False,
        help="keep each finished run's resume checkpoints (RUN_DIR/checkpoints: weights and optimizer state, about 3x the "
        "model each); off: deleted once final/ is written, since a finished run is never resumed (final/ and the snapshots stay)",
    )
    keep_snapshots: bool = setting(
        False,
        help="keep the step-N model snapshots (RUN_DIR/snapshots) after they are evaluated; off: deleted then (final/ stays), "
        "so a task added to a finished study later is answered by final/ only",
    )
    threads: int | None = setting(
        None,
        help="CPU threads of training and evaluation (torch.set_num_threads); null = torch's default (one per core). On a machine "
        "busy with other jobs 1 is often much faster: torch's threads otherwise wait on each other at every step",
    )

    def __post_init__(self) -> None:
        if self.updates < 1:
            raise ValueError(f"updates must be >= 1, got {self.updates}")
        for kind, names in (("mixture", [m.name for m in self.mixtures]), ("task", [t.name for t in self.tasks]),
                            ("arm", list(self.arms)), ("seed", self.seeds), ("model", self.models)):
            duplicates = sorted({str(n) for n in names if names.count(n) > 1})
            if duplicates:
                raise ValueError(f"{kind}s must differ; repeated: {', '.join(duplicates)}")
        if not self.mixtures or not self.arms or not self.seeds or not self.tasks:
            raise ValueError("give at least one mixture, arm, seed and task")
        for seed in self.seeds:
            check_seed(seed, "seeds")
        for arm in self.arm_overrides:
            if arm not in self.arms:
                raise ValueError(f"arm_overrides.{arm}: {arm!r} is not one of arms {list(self.arms)}")
        for model in self.models:
            if not model_slug(model):
                raise ValueError(f"model {model!r} has no name to put in a cell id")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be >= 1 or null, got {self.threads}")
        shortest = min(self.updates_of(m.name) for m in self.mixtures)
        if self.eval.checkpoint_every and self.eval.checkpoint_every >= shortest:
            raise ValueError(f"eval.checkpoint_every ({self.eval.checkpoint_every}) must be below the updates of every mixture ({shortest}); final/ is always evaluated")

    def updates_of(self, mixture: str) -> int:
        """The optimizer updates every arm makes on ``mixture``."""
        spec = next(m for m in self.mixtures if m.name == mixture)
        return spec.updates or self.updates


def model_slug(model: str) -> str:
    """A model reference as a cell-id part: its last path component, with anything odd replaced by '-'."""
    last = model.rstrip("/").split("/")[-1]
    return re.sub(r"[^A-Za-z0-9.-]+", "-", last).strip("-")


__all__ = ["StudyConfig", "MixtureSpec", "TaskSpec", "StudyEvalSettings", "FidelityArmSettings", "model_slug", "ArmName"]
