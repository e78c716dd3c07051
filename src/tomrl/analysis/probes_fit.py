"""Linear probes with story-grouped cross-validation and a shuffled-label control.

    from tomrl.analysis.probes_fit import ProbeOptions, best_layers, probe_all_layers
    rows = probe_all_layers(states, labels, story_ids, orders, ProbeOptions(folds=5, seed=0))
    # states: (questions, layers, hidden); one row per layer and order, with the control beside

A probe is scikit-learn's ``LogisticRegression`` (L2, lbfgs) behind a ``StandardScaler``, both
fitted on the training folds only. The folds are grouped by story (``StratifiedGroupKFold``,
shuffled, seeded): the questions of one story are never split between training and test, and each
fold holds each order's labels in about the same proportions (see :func:`balanced_story_folds`).
Every question gets one out-of-fold prediction; a layer's accuracy pools them, with its 95 % Wilson interval
(:func:`tomrl.stats.accuracy`), overall and per order of belief (one probe for all orders: a
probe per order would train on a fifth of the few questions there are).

The control is the same pipeline, folds made the same way, with the labels permuted (seeded) across
stories *within each order*, averaged over ``shuffles`` permutations (one permutation's labels can
line up with something decodable by chance; the mean, with the range over permutations beside it,
cannot as easily). It keeps how often each label occurs at each order, so a probe that
only reads the order off the question (the number of "thinks") and predicts that order's
commonest label scores as well on the control; whatever the real probe gains over it, it read
from the state. It is scored against the permuted labels it was trained on.
"""

from __future__ import annotations

import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from tomrl.config import setting
from tomrl.stats import Accuracy, accuracy, wilson_interval

ALL_ORDERS = "all"


@dataclass(frozen=True)
class ProbeOptions:
    """How the probes are fitted and checked (``tomrl analyze probes`` options)."""

    folds: int = setting(5, help="cross-validation folds, grouped by story (fewer when there are fewer stories)")
    seed: int = setting(0, help="seed of the question selection, the folds and the label permutation of the control")
    shuffles: int = setting(5, help="label permutations of the shuffled-label control; it reports their mean accuracy")
    regularization: float = setting(0.1, help="the probe's C (inverse L2 strength) on standardized states; small = strong")
    max_iter: int = setting(5000, help="lbfgs iterations per probe")

    def __post_init__(self) -> None:
        if self.folds < 2:
            raise ValueError(f"folds must be at least 2, got {self.folds}")
        if self.shuffles < 1:
            raise ValueError(f"shuffles must be at least 1, got {self.shuffles}")
        if not self.regularization > 0:
            raise ValueError(f"regularization must be > 0, got {self.regularization}")


def story_folds(
    story_ids: Sequence[str], folds: int, seed: int, strata: Sequence[int] | None = None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train, test) index arrays; each story's questions all land in one test fold.

    With ``strata`` (one class per question) the folds are also balanced on it as far as whole
    stories allow (``StratifiedGroupKFold``).
    """
    from sklearn.model_selection import GroupKFold, StratifiedGroupKFold

    stories = len(set(story_ids))
    if stories < 2:
        raise ValueError(f"cross-validation by story needs at least 2 stories, got {stories}")
    groups = np.asarray(story_ids)
    if strata is None:
        splitter = GroupKFold(n_splits=min(folds, stories), shuffle=True, random_state=seed)
        return [(train, test) for train, test in splitter.split(np.zeros(len(groups)), groups=groups)]
    splitter = StratifiedGroupKFold(n_splits=min(folds, stories), shuffle=True, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "the least populated class has only k members": expected
        return [(train, test) for train, test in splitter.split(np.zeros(len(groups)), np.asarray(strata), groups)]


def balanced_story_folds(
    labels: np.ndarray, story_ids: Sequence[str], orders: Sequence[int], options: "ProbeOptions"
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Folds by story, balanced on (order, label) (on the label alone, or not at all, when no such class has
    a question for every fold: tiny data). Balanced folds matter for the control: with
    unbalanced ones a probe that learns only the training folds' label frequencies scores *below*
    chance on the test fold, whose frequencies lean the other way, and the control sinks under
    the majority rate it should sit at."""
    folds = min(options.folds, len(set(story_ids)))
    for strata in ([order * 1000 + int(label) for order, label in zip(orders, labels)], [int(label) for label in labels]):
        if max(Counter(strata).values()) >= folds:  # else scikit-learn refuses: no class fills every fold
            return story_folds(story_ids, options.folds, options.seed, strata)
    return story_folds(story_ids, options.folds, options.seed)


def permute_within_orders(labels: np.ndarray, orders: Sequence[int], seed: int) -> np.ndarray:
    """``labels`` shuffled among the questions of each order (seeded)."""
    rng = np.random.default_rng(seed)
    shuffled = labels.copy()
    by_order: dict[int, list[int]] = defaultdict(list)
    for index, order in enumerate(orders):
        by_order[order].append(index)
    for order in sorted(by_order):
        indices = np.asarray(by_order[order])
        shuffled[indices] = labels[rng.permutation(indices)]
    return shuffled


def out_of_fold_predictions(
    features: np.ndarray, labels: np.ndarray, folds: Sequence[tuple[np.ndarray, np.ndarray]], options: ProbeOptions
) -> np.ndarray:
    """Each question's label as predicted by the probe fitted on the folds that do not hold its story."""
    from sklearn.decomposition import PCA
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    predictions = np.empty_like(labels)
    for train, test in folds:
        seen = np.unique(labels[train])
        if len(seen) == 1:  # one class in training: the only prediction a probe could make
            predictions[test] = seen[0]
            continue
        # PCA keeping every component only rotates the standardized states onto the span of the
        # training rows, where the L2-regularized solution lies anyway: the same probe, fitted in
        # n_train instead of `hidden` dimensions (about twice as fast for 100 questions).
        probe = make_pipeline(StandardScaler(), PCA(), LogisticRegression(C=options.regularization, max_iter=options.max_iter))
        with warnings.catch_warnings():
            # Constant dimensions (the embedding layer at one fixed token) standardize to 0, harmlessly.
            warnings.simplefilter("ignore", RuntimeWarning)
            warnings.simplefilter("ignore", ConvergenceWarning)
            probe.fit(features[train], labels[train])
        predictions[test] = probe.predict(features[test])
    return predictions


def majority_rate(labels: np.ndarray, orders: Sequence[int]) -> float:
    """Accuracy of guessing each order's commonest label: what reading the order off the question gives."""
    if len(labels) == 0:
        return 0.0
    by_order: dict[int, Counter] = defaultdict(Counter)
    for label, order in zip(labels.tolist(), orders):
        by_order[order][label] += 1
    return sum(counts.most_common(1)[0][1] for counts in by_order.values()) / len(labels)


def probe_all_layers(
    states: np.ndarray,
    labels: np.ndarray,
    story_ids: Sequence[str],
    orders: Sequence[int],
    options: ProbeOptions,
    split: Callable[[np.ndarray], Sequence[tuple[np.ndarray, np.ndarray]]] | None = None,
) -> list[dict[str, Any]]:
    """One row per layer and order ("all" first): n, stories, probe and control accuracy, majority rate.

    ``states`` is (questions, layers, hidden); ``labels`` one integer per question. ``split(labels)``
    gives the folds (default: :func:`balanced_story_folds`, for the real and the permuted labels each).
    """
    from threadpoolctl import threadpool_limits

    labels = np.asarray(labels)
    orders = [int(o) for o in orders]
    # Several permutations: one permutation's labels can line up with something decodable by chance,
    # and the same permutation serves every layer and model, so its luck would show everywhere.
    shuffled = [permute_within_orders(labels, orders, options.seed + r) for r in range(options.shuffles)]
    split = split or (lambda y: balanced_story_folds(y, story_ids, orders, options))
    folds = split(labels)
    shuffled_folds = [split(y) for y in shuffled]
    subsets: dict[int | str, np.ndarray] = {ALL_ORDERS: np.arange(len(labels))}
    for order in sorted(set(orders)):
        subsets[order] = np.asarray([i for i, o in enumerate(orders) if o == order])
    rows: list[dict[str, Any]] = []
    for layer in range(states.shape[1]):
        features = states[:, layer, :]
        # A probe's matrices are tiny: BLAS threads cost more than they give (8 times slower
        # with two threads than with one on a busy 2-core machine).
        with threadpool_limits(limits=1):
            predicted = out_of_fold_predictions(features, labels, folds, options)
            controls = [out_of_fold_predictions(features, y, f, options) == y for y, f in zip(shuffled, shuffled_folds)]
        for order, index in subsets.items():
            each = [float(right[index].mean()) for right in controls]
            rows.append({
                "layer": layer,
                "order": order,
                "n": int(len(index)),
                "stories": len({story_ids[i] for i in index}),
                "accuracy": accuracy((predicted[index] == labels[index]).tolist()).to_dict(),
                "control": mean_accuracy([int(right[index].sum()) for right in controls], len(index)).to_dict(),
                "control_range": [min(each), max(each)],
                "majority": majority_rate(labels[index], [orders[i] for i in index]),
                "classes": {str(k): v for k, v in sorted(Counter(labels[index].tolist()).items())},
            })
    return rows


def mean_accuracy(correct_counts: Sequence[int], n: int) -> Accuracy:
    """The mean accuracy of several runs on the same n questions, with the Wilson interval of one run
    at that accuracy (the spread of one permutation's control, not of their mean)."""
    k = sum(correct_counts) / len(correct_counts)
    low, high = wilson_interval(round(k), n)
    return Accuracy(n=n, k=round(k), value=k / n if n else 0.0, low=low, high=high)


def as_accuracy(data: dict[str, Any]) -> Accuracy:
    return Accuracy(**data)


def verdict(probe: Accuracy, control: Accuracy, majority: float) -> str:
    """"above control" only when the probe's whole interval is above the control's and above the
    majority rate; otherwise "inconclusive at n = …" (the state may carry it; this n cannot tell)."""
    if probe.low > control.high and probe.low > majority:
        return "above control"
    return f"inconclusive at n = {probe.n}"


def best_layers(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per model, target and order: the layer with the highest probe accuracy (the lowest such layer
    on ties), the control at that layer, and the control's own best layer.

    The best layer is chosen on the same out-of-fold predictions it is scored on, so its accuracy is
    optimistic; the control's best layer is chosen the same way and is what it is compared with.
    """
    groups: dict[tuple[str, str, Any], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[(row["model"], row["target"], row["order"])].append(row)
    best: list[dict[str, Any]] = []
    for (model, target, order), group in groups.items():
        top = max(group, key=lambda r: (r["accuracy"]["value"], -r["layer"]))
        top_control = max(group, key=lambda r: (r["control"]["value"], -r["layer"]))
        probe, control = as_accuracy(top["accuracy"]), as_accuracy(top_control["control"])
        best.append({
            "model": model, "target": target, "order": order, "layer": top["layer"], "n": top["n"],
            "stories": top["stories"], "accuracy": top["accuracy"], "control_same_layer": top["control"],
            "control_best_layer": top_control["layer"], "control": top_control["control"],
            "control_range": top_control["control_range"],
            "majority": top["majority"], "verdict": verdict(probe, control, top["majority"]),
        })
    return best
