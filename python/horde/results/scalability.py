"""The scalability model: the Universal Scalability Law fitted to measured throughput at several
instance (or user) counts, and what it forecasts beyond them, with intervals and refusals.

    X(N) = λN / (1 + σ(N − 1) + κN(N − 1))

λ is one instance's throughput, σ the contention (the fraction of work that queues on something
shared: a lock, a database's row), κ the coherency cost (crosstalk between every pair of
instances: a cache kept in step). With κ > 0 throughput peaks at N = √((1 − σ) / κ) and falls
past it; linear arithmetic (``capacity.py`` without a study) never says so.

The fit is least squares on relative residuals (a throughput's noise grows with it), σ, κ ≥ 0.
Intervals come from a residual bootstrap with a fixed seed, so the same points give the same
answer: the parameters' confidence intervals from the refitted replicates, a forecast's
prediction interval from each replicate's curve times a new measurement's noise (the fit's
uncertainty and the measurement noise together). A dozen points estimate the noise's scale
loosely, so each replicate also draws a scale, √(spare/χ²) with the fit's spare degrees of
freedom, that stretches both its curve's distance from the replicates' median and its noise:
Student's t in both parts (with the scale held at its estimate, the backtest's systems peaking
near 16 had 83–86 % of fresh measurements inside a 90 % interval).

At the bounds the bootstrap alone is not honest. When the truth has κ = 0 (or κ too small for the
measured range to show), half the fits would want a κ below 0: held at 0, every replicate's κ
errs upward, their curves bend down, and the band sits below the truth far out (the backtest's
κ = 0 systems: 79–81 % of fresh measurements inside a 90 % interval). So the nested curve without
coherency is fitted too (λ and σ), and the extra sum of squares F test (1 and n − 3 degrees of
freedom) asks whether the data reject it. Unless they do (p < ``NESTED_P``), that curve is
bootstrapped the same way and the interval is the union of both bands: the data allow either
curve, so the interval holds either's forecast. When κ = 0 is rejected nothing changes. The
fitted curve's own noise band is joined in as well, for σ held at its bound. The point forecast
stays the median of the full model's replicates (the nested curve is not averaged in: on systems
with coherency it would run high).

>>> fit = fit_scalability([(1, 1000.0), (2, 1887.0), (3, 2655.0), (4, 3306.0), (6, 4286.0)])
>>> fit.refusal is None, round(fit.model.sigma, 3), round(fit.model.kappa, 4)
(True, 0.05, 0.005)
>>> round(fit.model.peak_n(), 1), fit.model.best_whole_n()
(13.8, 14)
>>> round(fit.forecast(12).throughput)
5429
>>> fit.forecast(30).refusal
'30 instances is past 4× the largest measured (6 instances): the model is not forecast beyond 24'

Refusals are sentences in the result, never exceptions:

>>> fit_scalability([(1, 1000.0), (2, 1900.0)]).refusal
'2 instance counts measured (1, 2): a fit of λ, σ and κ needs at least 3'
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

#: The fewest distinct counts a fit of three parameters accepts.
MIN_DISTINCT_N = 3
#: How far past the largest measured count a forecast goes: at 4× it is still the curve the
#: points bent (the backtest in bench/FIGURES.md measures its error there); further out the
#: answer is κ's guess.
MAX_EXTRAPOLATION = 4.0
#: ... and only as far as its 90 % prediction interval is at most this share of the forecast
#: wide (about ±40 %: the interval's low end over 0.6 of its high end). Wider, the measured points
#: do not tell the curve there (κ barely shows in them) and no count could be sized by it: the
#: forecast is refused as not known, with how far the model does reach. The backtest
#: (bench/FIGURES.md) gives the share of forecasts given at 2–4× and their error.
MAX_INTERVAL_WIDTH = 0.8
#: Without repeated runs there is no noise estimate: a fit missing the points by more than this
#: (root mean square of relative residuals) is refused. A steady run's throughput repeats within
#: a few per cent on one machine, and a curve USL can draw stays within that; a step or a
#: collapse the law cannot draw misses by far more.
MAX_RELATIVE_RESIDUAL = 0.05
#: With repeats, a lack-of-fit F test against the pure noise refuses below this p-value.
LACK_OF_FIT_P = 0.01
#: A curve without coherency (κ = 0) stays in a prediction interval unless the extra-sum-of-squares
#: F test rejects it below this p-value (see :func:`fit_scalability`).
NESTED_P = 0.05
#: The coverage of every interval reported.
CONFIDENCE = 0.90
#: Bootstrap replicates, and their seed (answers are reproducible).
BOOTSTRAP_REPLICATES = 300
BOOTSTRAP_SEED = 39
#: New measurements drawn around each replicate's forecast for a prediction interval.
NOISE_DRAWS_PER_REPLICATE = 4


@dataclass(frozen=True)
class Model:
    """One fitted curve: λ (throughput of one), σ (contention), κ (coherency)."""

    lam: float
    sigma: float
    kappa: float

    def throughput(self, n: float) -> float:
        return self.lam * n / (1 + self.sigma * (n - 1) + self.kappa * n * (n - 1))

    def peak_n(self) -> float | None:
        """The N where throughput peaks; None when it never does (κ = 0)."""
        if self.sigma >= 1:
            return 1.0  # contention alone already stops growth at one
        if self.kappa <= 0:
            return None
        return math.sqrt((1 - self.sigma) / self.kappa)

    def best_whole_n(self) -> int | None:
        """The whole count with the highest throughput (past it, throughput falls)."""
        peak = self.peak_n()
        if peak is None:
            return None
        low = max(1, math.floor(peak))
        return max((low, low + 1), key=self.throughput)


@dataclass(frozen=True)
class Forecast:
    """Throughput forecast at ``n`` with its prediction interval, or why there is none."""

    n: float
    throughput: float | None = None
    low: float | None = None
    high: float | None = None
    refusal: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "throughput": _round(self.throughput),
            "low": _round(self.low),
            "high": _round(self.high),
            "refusal": self.refusal,
        }


@dataclass(frozen=True)
class CountAnswer:
    """A count (instances for a peak, users supported) with its interval, or why there is none.
    ``high`` None with a count means the interval's far end is past what may be forecast."""

    count: int | None = None
    low: int | None = None
    high: int | None = None
    refusal: str | None = None
    #: The count is a lower bound: served where the model's reach ends, and past it not known
    #: (``why`` says why the model reaches no further).
    at_least: bool = False
    why: str | None = None


@dataclass
class ScalabilityFit:
    """The model fitted to ``points`` ((N, X) pairs), its intervals, or why it is refused."""

    points: list[tuple[float, float]]
    unit: str = "instances"
    model: Model | None = None
    refusal: str | None = None
    #: Root mean square relative residual of the fit.
    rms_residual: float | None = None
    #: Relative noise from repeated runs at the same N (None without repeats).
    noise: float | None = None
    #: The refitted bootstrap curves, and the relative residuals they were refitted to.
    replicates: list[Model] = field(default_factory=list)
    residuals: list[float] = field(default_factory=list)
    #: Draws of a new measurement's relative noise: Student's t with the fit's spare degrees of
    #: freedom, scaled by the residuals' standard deviation (a dozen residuals resampled have no
    #: tails: their 5 % and 95 % quantiles fall short of the noise's).
    noise_draws: list[float] = field(default_factory=list)
    #: When the data do not reject κ = 0: that nested curve's bootstrap replicates and noise draws,
    #: bootstrapped the same way (empty when the F test rejects it).
    nested_replicates: list[Model] = field(default_factory=list)
    nested_noise_draws: list[float] = field(default_factory=list)
    #: Each replicate's draw of the noise's scale (√(spare/χ²)), and the nested curve's.
    scales: list[float] = field(default_factory=list)
    nested_scales: list[float] = field(default_factory=list)
    #: The F test's p-value for κ = 0 against the fitted curve (1 when κ was fitted at 0).
    kappa_zero_p: float | None = None
    note: str | None = None
    #: How far the model is forecast (see :attr:`forecast_limit`), found once asked.
    _reach: float | None = field(default=None, repr=False)

    @property
    def max_n(self) -> float:
        return max(n for n, _ in self.points)

    @property
    def forecast_limit(self) -> float:
        """How far the model is forecast: at most ``MAX_EXTRAPOLATION`` times the largest
        measured count, and only while the prediction interval is at most
        ``MAX_INTERVAL_WIDTH`` of the forecast wide (never less than the largest measured)."""
        if self._reach is None:
            self._reach = self._find_reach()
        return self._reach

    @property
    def _cut_short(self) -> bool:
        """Whether the interval ended the reach before ``MAX_EXTRAPOLATION``."""
        return self.forecast_limit < MAX_EXTRAPOLATION * self.max_n - 1e-9

    def _find_reach(self) -> float:
        far = MAX_EXTRAPOLATION * self.max_n
        if self.model is None or not self.replicates:
            return far
        reach = self.max_n
        for n in curve_counts(far):
            if n <= self.max_n:
                continue
            value, low, high = self._predicted(n)
            if (high - low) > MAX_INTERVAL_WIDTH * value:
                return reach
            reach = n
        return far

    def interval(self, name: str) -> tuple[float, float] | None:
        """The ``CONFIDENCE`` interval of ``lam``, ``sigma`` or ``kappa`` over the replicates."""
        if not self.replicates:
            return None
        values = sorted(getattr(model, name) for model in self.replicates)
        return _quantile(values, (1 - CONFIDENCE) / 2), _quantile(values, (1 + CONFIDENCE) / 2)

    def peak_interval(self) -> tuple[float, float | None] | None:
        """The peak N's interval; its high end None when more than the tail of the replicates
        never peak (κ = 0): the data cannot rule out growth without a peak."""
        if not self.replicates:
            return None
        values = sorted(math.inf if (p := model.peak_n()) is None else p for model in self.replicates)
        low, high = _quantile(values, (1 - CONFIDENCE) / 2), _quantile(values, (1 + CONFIDENCE) / 2)
        return low, None if math.isinf(high) else high

    def forecast(self, n: float) -> Forecast:
        if self.model is None:
            return Forecast(n, refusal=self.refusal)
        if not n >= 1:
            return Forecast(n, refusal=f"{_count(n, self.unit)}: a forecast needs at least 1")
        if n > self.forecast_limit + 1e-9:
            return Forecast(n, refusal=self._too_far(n))
        if not self.replicates:
            return Forecast(n, self.model.throughput(n))
        return Forecast(n, *self._predicted(n))

    def _predicted(self, n: float) -> tuple[float, float, float]:
        """The forecast at ``n`` and its prediction interval, wherever ``n`` lies (the fit has
        replicates)."""
        assert self.model is not None
        # The median of the bootstrap curves, not the single fit's: far out (κ barely seen in the
        # measured range) it is the less biased of the two (bench/scalability_backtest.py).
        value = _quantile(sorted(model.throughput(n) for model in self.replicates), 0.5)
        bands = [
            _band(self.replicates, self.scales, self.noise_draws, n),
            _band([self.model], [1.0], self.noise_draws, n),
        ]
        if self.nested_replicates:
            bands.append(_band(self.nested_replicates, self.nested_scales, self.nested_noise_draws, n))
        return value, min(b[0] for b in bands), max(b[1] for b in bands)

    def _too_far(self, n: float) -> str:
        if not self._cut_short or n > MAX_EXTRAPOLATION * self.max_n + 1e-9:
            return (
                f"{_count(n, self.unit)} is past {MAX_EXTRAPOLATION:g}× the largest measured "
                f"({_count(self.max_n, self.unit)}): the model is not forecast beyond {self.forecast_limit:g}"
            )
        return f"{_count(n, self.unit)}: " + self._reach_reason()

    def _reach_reason(self) -> str:
        """Why the model stops where it does, when its interval stopped it."""
        return (
            f"past {_count(self.forecast_limit, self.unit)} the 90 % interval of the forecast is wider than "
            f"{MAX_INTERVAL_WIDTH * 100:.0f} % of it: the measured points do not tell the curve that far (measure a "
            "larger count, or repeat runs, to forecast further)"
        )

    def instances_for(self, peak: float, headroom_percent: float) -> CountAnswer:
        """The fewest counts whose throughput, less ``headroom_percent``, carries ``peak``: at
        the fitted curve, and at the prediction interval's two ends (its high end the fewest
        counts, its low end the most)."""
        if self.model is None:
            return CountAnswer(refusal=self.refusal)
        need = peak / (1 - headroom_percent / 100)
        limit = math.floor(self.forecast_limit + 1e-9)
        counts = range(1, limit + 1)
        forecasts = {k: self.forecast(k) for k in counts}
        central = next((k for k in counts if (forecasts[k].throughput or 0) >= need), None)
        if central is None:
            best = self.model.best_whole_n()
            if best is not None and self.model.throughput(best) < need:
                return CountAnswer(
                    refusal=f"throughput peaks at {self.model.throughput(best):,.0f}/s with {_count(best, self.unit)} "
                    "and falls past it"
                )
            if self._cut_short:
                return CountAnswer(refusal=f"it needs more than {_count(limit, self.unit)}; " + self._reach_reason())
            return CountAnswer(
                refusal=f"it needs more than {_count(limit, self.unit)}, and the model is not forecast past "
                f"{MAX_EXTRAPOLATION:g}× the largest measured ({_count(self.max_n, self.unit)})"
            )
        if not self.replicates:
            return CountAnswer(central)
        low = next((k for k in counts if (forecasts[k].high or 0) >= need), central)
        high = next((k for k in counts if (forecasts[k].low or 0) >= need), None)
        return CountAnswer(central, low, high)

    def users_supported(self, per_user_rate: float) -> CountAnswer:
        """The most users whose forecast throughput still serves each its ``per_user_rate``
        (X(N) ≥ N × rate; past it users queue), with the interval over the replicates."""
        if self.model is None:
            return CountAnswer(refusal=self.refusal)
        limit = math.floor(self.forecast_limit + 1e-9)
        models = self.replicates or [self.model]
        answers = sorted(float(_most_served(model, per_user_rate, limit) or 0) for model in models)
        central = round(_quantile(answers, 0.5))  # the median curve's answer, as a forecast's
        if central < 1:
            return CountAnswer(refusal=f"even 1 user gets less than {per_user_rate:g}/s from the fitted curve")
        if central >= limit:
            # Served where the reach ends; whether more are is past what the model forecasts.
            return CountAnswer(
                limit, at_least=True, why=self._reach_reason() if self._cut_short else self._too_far(limit + 1)
            )
        if not self.replicates:
            return CountAnswer(central)
        low = math.floor(_quantile(answers, (1 - CONFIDENCE) / 2))
        high = math.ceil(_quantile(answers, (1 + CONFIDENCE) / 2))
        return CountAnswer(central, low, None if high >= limit else high)

    def to_dict(self) -> dict[str, Any]:
        """The fit as the study JSON and the report keep it."""
        block: dict[str, Any] = {
            "unit": self.unit,
            "points": [[n, round(x, 3)] for n, x in self.points],
            "refusal": self.refusal,
            "confidence": CONFIDENCE,
            "max_extrapolation": MAX_EXTRAPOLATION,
            "max_interval_width": MAX_INTERVAL_WIDTH,
        }
        if self.model is None:
            return block
        peak = self.peak_interval()
        block.update(
            {
                "lambda": _round(self.model.lam),
                "sigma": _round(self.model.sigma, 6),
                "kappa": _round(self.model.kappa, 8),
                "lambda_interval": _pair(self.interval("lam")),
                "sigma_interval": _pair(self.interval("sigma"), 6),
                "kappa_interval": _pair(self.interval("kappa"), 8),
                "peak_n": _round(self.model.peak_n(), 2),
                "peak_whole_n": self.model.best_whole_n(),
                "peak_n_interval": None if peak is None else [_round(peak[0], 2), _round(peak[1], 2)],
                "rms_residual": _round(self.rms_residual, 5),
                "noise": _round(self.noise, 5),
                "note": self.note,
                "forecast_limit": _round(self.forecast_limit, 2),
                "curve": [self.forecast(n).to_dict() for n in curve_counts(self.forecast_limit)],
                # At 2×, 3× and 4× the largest measured count: what the terminal prints.
                "beyond": [self.forecast(k * self.max_n).to_dict() for k in (2, 3, 4)],
            }
        )
        return block


def curve_counts(limit: float) -> list[float]:
    """The counts a drawn curve is evaluated at: every whole count up to 64, then 64 steps."""
    if limit <= 64:
        return [float(n) for n in range(1, math.floor(limit) + 1)]
    return [round(1 + (limit - 1) * i / 64, 3) for i in range(65)]


def fit_scalability(points: Sequence[tuple[float, float]], *, unit: str = "instances") -> ScalabilityFit:
    """The model fitted to (N, X) points (repeats of an N allowed), or a refusal saying why."""
    points = [(float(n), float(x)) for n, x in points]
    fit = ScalabilityFit(points=points, unit=unit)
    distinct = sorted({n for n, _ in points})
    if not distinct:
        fit.refusal = f"no {unit[:-1]} count has a throughput to fit"
        return fit
    if len(distinct) < MIN_DISTINCT_N:
        listed = ", ".join(f"{n:g}" for n in distinct)
        fit.refusal = (
            f"{len(distinct)} {unit[:-1]} count{'' if len(distinct) == 1 else 's'} measured ({listed}): "
            f"a fit of λ, σ and κ needs at least {MIN_DISTINCT_N}"
        )
        return fit
    bad = next(((n, x) for n, x in points if not (n >= 1 and math.isfinite(n) and x > 0 and math.isfinite(x))), None)
    if bad is not None:
        fit.refusal = f"the point N={bad[0]:g}, X={bad[1]:g} cannot be fitted: N must be at least 1 and X above 0"
        return fit
    model = _least_squares(points)
    fit.model = model
    relative = [(x - model.throughput(n)) / model.throughput(n) for n, x in points]
    parameters = 3
    spare = len(points) - parameters
    fit.rms_residual = math.sqrt(sum(e * e for e in relative) / len(relative))
    noise_ss, noise_df = _pure_noise(points)
    fit.noise = math.sqrt(noise_ss / noise_df) if noise_df else None
    # A parameter held at its bound of 0 was not fitted: the misfit has its degree of freedom.
    lack_df = len(distinct) - (1 + (model.sigma > 0) + (model.kappa > 0))
    lack_ss = max(sum(e * e for e in relative) - noise_ss, 0.0)
    if noise_df and lack_df > 0:
        if noise_ss == 0:
            p = 0.0 if lack_ss > 1e-12 else 1.0
        else:
            p = 1 - _f_cdf((lack_ss / lack_df) / (noise_ss / noise_df), lack_df, noise_df)
        if p < LACK_OF_FIT_P:
            fit.refusal = (
                f"the curve misses the measured means by more than the noise between repeated runs explains "
                f"(lack-of-fit F test p = {p:.2g}, noise {fit.noise:.1%}): the throughput does not follow the "
                "scalability law, so it is not extrapolated"
            )
    elif not noise_df and lack_df > 0 and fit.rms_residual > MAX_RELATIVE_RESIDUAL:
        fit.refusal = (
            f"the curve misses the measured points by {fit.rms_residual:.1%} (root mean square), more than the "
            f"{MAX_RELATIVE_RESIDUAL:.0%} a steady run's noise explains: the throughput does not follow the "
            "scalability law, so it is not extrapolated"
        )
    if fit.refusal is not None:
        fit.model = None
        return fit
    if spare <= 0:
        fit.note = (
            f"{len(points)} points fit 3 parameters exactly: no noise estimate, so no interval; "
            "measure another count or repeat runs"
        )
        return fit
    fit.residuals, fit.replicates, fit.noise_draws, fit.scales = _bootstrap(points, model, parameters)
    # κ is bounded at 0, so the replicates' κ can only err upward and their curves bend down:
    # when the data cannot tell the fitted curve from one without coherency (the extra sum of
    # squares F test, 1 and `spare` degrees of freedom), that curve's band is joined in.
    nested = _least_squares(points, start=model, hold_kappa=True)
    full_error = _error(points, model)
    extra = _error(points, nested) - full_error
    if extra <= 1e-15 * max(full_error, 1e-300):
        fit.kappa_zero_p = 1.0
    elif full_error <= 0:
        fit.kappa_zero_p = 0.0
    else:
        fit.kappa_zero_p = 1 - _f_cdf(extra / (full_error / spare), 1, spare)
    if fit.kappa_zero_p >= NESTED_P:
        _, fit.nested_replicates, fit.nested_noise_draws, fit.nested_scales = _bootstrap(
            points, nested, 2, hold_kappa=True
        )
    return fit


def _band(models: Sequence[Model], scales: Sequence[float], draws: Sequence[float], n: float) -> tuple[float, float]:
    """The ``CONFIDENCE`` prediction band at ``n``: each curve's forecast, its distance from their
    median times its scale draw, times a new measurement's noise."""
    count = len(models)
    values = [model.throughput(n) for model in models]
    median = _quantile(sorted(values), 0.5)
    curves = [median + scale * (value - median) for value, scale in zip(values, scales)]
    predicted = sorted(curves[index % count] * (1 + draw) for index, draw in enumerate(draws))
    return _quantile(predicted, (1 - CONFIDENCE) / 2), _quantile(predicted, (1 + CONFIDENCE) / 2)


def _bootstrap(
    points: Sequence[tuple[float, float]], model: Model, parameters: int, *, hold_kappa: bool = False
) -> tuple[list[float], list[Model], list[float], list[float]]:
    """A residual bootstrap of ``model`` (fitted to ``points`` with ``parameters`` free): the
    inflated relative residuals, the refitted replicates, draws of a new measurement's noise, and
    each replicate's draw of the noise's scale."""
    relative = [(x - model.throughput(n)) / model.throughput(n) for n, x in points]
    spare = len(points) - parameters
    # Residuals of a least-squares fit are smaller than the noise by √((n − p)/n): inflated back.
    inflate = math.sqrt(len(points) / spare)
    mean = sum(relative) / len(relative)
    residuals = [(e - mean) * inflate for e in relative]
    spread = math.sqrt(sum((e - mean) ** 2 for e in relative) / spare)
    # The noise's scale is itself estimated with `spare` degrees of freedom: each replicate draws
    # one (√(spare/χ²) times the estimate), which scales both its curve's distance from the
    # replicates' median (to first order a refit's error grows with the noise it was refitted
    # to; the median, the point forecast, stays as the plain bootstrap gives it) and the new
    # measurements drawn around it: a forecast is Student's t in both its parts.
    draws = random.Random(BOOTSTRAP_SEED + 1)
    scales = [math.sqrt(spare / draws.gammavariate(spare / 2, 2)) for _ in range(BOOTSTRAP_REPLICATES)]
    noise_draws = [
        spread * scales[index % BOOTSTRAP_REPLICATES] * draws.gauss(0, 1)
        for index in range(NOISE_DRAWS_PER_REPLICATE * BOOTSTRAP_REPLICATES)
    ]
    rng = random.Random(BOOTSTRAP_SEED)
    fitted = [model.throughput(n) for n, _ in points]
    replicates = []
    for _ in scales:
        resampled = [(n, f * (1 + rng.choice(residuals))) for (n, _), f in zip(points, fitted)]
        replicates.append(_least_squares(resampled, start=model, hold_kappa=hold_kappa))
    return residuals, replicates, noise_draws, scales


def fit_users(points: Sequence[tuple[float, float]]) -> ScalabilityFit:
    """The same fit where N is users (a game's players, a gateway's devices) and X their total
    throughput: :meth:`ScalabilityFit.users_supported` then answers at a per-user rate."""
    return fit_scalability(points, unit="users")


def _most_served(model: Model, rate: float, limit: int) -> int | None:
    # X(N)/N = λ/D(N) falls with N: the largest N with λ/D(N) ≥ rate, by bisection.
    if model.throughput(1) < rate:
        return None
    low, high = 1, limit
    if model.throughput(high) >= rate * high:
        return high
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if model.throughput(middle) >= rate * middle else (low, middle)
    return low


def _pure_noise(points: Sequence[tuple[float, float]]) -> tuple[float, int]:
    """Sum of squared relative deviations of repeats from their N's mean, and its degrees of freedom."""
    groups: dict[float, list[float]] = {}
    for n, x in points:
        groups.setdefault(n, []).append(x)
    squares, freedom = 0.0, 0
    for values in groups.values():
        mean = sum(values) / len(values)
        squares += sum(((x - mean) / mean) ** 2 for x in values)
        freedom += len(values) - 1
    return squares, freedom


# ----------------------------------------------------------------------------- least squares


def _least_squares(
    points: Sequence[tuple[float, float]], start: Model | None = None, *, hold_kappa: bool = False
) -> Model:
    """σ, κ ≥ 0 minimising the relative squared error: Levenberg-Marquardt over each pattern of
    bounds (σ and κ free or held at 0), the lowest error kept; κ always 0 with ``hold_kappa``."""
    best: tuple[float, Model] | None = None
    for free_sigma in (True, False):
        for free_kappa in (False,) if hold_kappa else (True, False):
            initial = start or _linearised(points, free_sigma, free_kappa)
            initial = Model(initial.lam, initial.sigma if free_sigma else 0.0, initial.kappa if free_kappa else 0.0)
            model = _marquardt(points, initial, (True, free_sigma, free_kappa))
            error = _error(points, model)
            if best is None or error < best[0] - 1e-15:
                best = (error, model)
    assert best is not None
    return best[1]


def _linearised(points: Sequence[tuple[float, float]], free_sigma: bool, free_kappa: bool) -> Model:
    """A start from N/X = (1 + σ(N−1) + κN(N−1)) / λ, linear in 1/λ, σ/λ, κ/λ."""
    columns = (
        [lambda n: 1.0] + ([lambda n: n - 1] if free_sigma else []) + ([lambda n: n * (n - 1)] if free_kappa else [])
    )
    rows = [[column(n) for column in columns] for n, _ in points]
    targets = [n / x for n, x in points]
    normal = [[sum(r[i] * r[j] for r in rows) for j in range(len(columns))] for i in range(len(columns))]
    right = [sum(r[i] * t for r, t in zip(rows, targets)) for i in range(len(columns))]
    solved = _solve(normal, right)
    if solved is None or solved[0] <= 0:
        return Model(max(x / n for n, x in points), 0.0, 0.0)
    a = solved[0]
    rest = iter(solved[1:])
    sigma = max(next(rest), 0.0) / a if free_sigma else 0.0
    kappa = max(next(rest), 0.0) / a if free_kappa else 0.0
    return Model(1 / a, sigma, kappa)


def _error(points: Sequence[tuple[float, float]], model: Model) -> float:
    return sum(((x - model.throughput(n)) / x) ** 2 for n, x in points)


def _marquardt(points: Sequence[tuple[float, float]], model: Model, free: tuple[bool, bool, bool]) -> Model:
    params = [model.lam, model.sigma, model.kappa]
    indices = [i for i in range(3) if free[i]]
    damping = 1e-3
    error = _error(points, model)
    for _ in range(200):
        lam, sigma, kappa = params
        jacobian, residuals = [], []
        for n, x in points:
            d = 1 + sigma * (n - 1) + kappa * n * (n - 1)
            f = lam * n / d
            full = (n / d, -lam * n * (n - 1) / d**2, -lam * n * n * (n - 1) / d**2)
            jacobian.append([full[i] / x for i in indices])
            residuals.append((x - f) / x)
        size = len(indices)
        normal = [[sum(row[i] * row[j] for row in jacobian) for j in range(size)] for i in range(size)]
        gradient = [sum(row[i] * r for row, r in zip(jacobian, residuals)) for i in range(size)]
        improved = False
        while damping < 1e12:
            damped = [[normal[i][j] * (1 + damping if i == j else 1) for j in range(size)] for i in range(size)]
            step = _solve(damped, gradient)
            if step is None:
                damping *= 10
                continue
            trial = list(params)
            for index, delta in zip(indices, step):
                trial[index] += delta
            # The bounds: λ above 0, σ and κ at least 0 (a step past one stops on it).
            trial = [max(trial[0], params[0] * 0.1), max(trial[1], 0.0), max(trial[2], 0.0)]
            candidate = Model(*trial)
            trial_error = _error(points, candidate)
            if trial_error <= error:
                converged = error - trial_error <= 1e-9 * error + 1e-30
                params, error, improved = trial, trial_error, True
                damping = max(damping / 10, 1e-12)
                if converged:
                    return Model(*params)
                break
            damping *= 10
        if not improved:
            break
    return Model(*params)


def _solve(matrix: list[list[float]], right: list[float]) -> list[float] | None:
    """Gaussian elimination with partial pivoting; None for a singular system."""
    size = len(right)
    a = [list(row) + [value] for row, value in zip(matrix, right)]
    for column in range(size):
        pivot = max(range(column, size), key=lambda r: abs(a[r][column]))
        if abs(a[pivot][column]) < 1e-300:
            return None
        a[column], a[pivot] = a[pivot], a[column]
        for r in range(column + 1, size):
            factor = a[r][column] / a[column][column]
            for c in range(column, size + 1):
                a[r][c] -= factor * a[column][c]
    solution = [0.0] * size
    for r in range(size - 1, -1, -1):
        solution[r] = (a[r][size] - sum(a[r][c] * solution[c] for c in range(r + 1, size))) / a[r][r]
    return solution


# ----------------------------------------------------------------------------- statistics


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (R's type 7)."""
    position = q * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    if math.isinf(sorted_values[high]) or math.isinf(sorted_values[low]):
        return sorted_values[high] if position - low > 0 else sorted_values[low]
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def _f_cdf(f: float, d1: int, d2: int) -> float:
    """P(F ≤ f) for Fisher's F with (d1, d2) degrees of freedom."""
    if f <= 0:
        return 0.0
    return _incomplete_beta(d1 * f / (d1 * f + d2), d1 / 2, d2 / 2)


def _incomplete_beta(x: float, a: float, b: float) -> float:
    """The regularised incomplete beta function I_x(a, b), by its continued fraction (Lentz)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    if x > (a + 1) / (a + b + 2):
        return 1 - _incomplete_beta(1 - x, b, a)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(1 - x)) / a
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    value = d
    for m in range(1, 300):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            value *= c * d
        if abs(c * d - 1) < 1e-12:
            break
    return front * value


def _count(n: float, unit: str) -> str:
    return f"{n:,.4g} {unit if n != 1 else unit[:-1]}"


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def _pair(pair: tuple[float, float] | None, digits: int = 3) -> list[float | None] | None:
    return None if pair is None else [_round(pair[0], digits), _round(pair[1], digits)]
