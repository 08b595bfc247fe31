"""The thresholds of the nightly decision rule (docs/tracking.md), from the config's ``tracking.params``."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass

from roofline.nightly.kernel_match import compile_rename


@dataclass(frozen=True)
class DecisionParams:
    """Thresholds of the decision rule (docs/tracking.md); ``per_kernel`` overrides by regex."""

    window: int = 7  # K: baseline = median of the last K valid nights of the segment
    noise_window: int = 21  # nights of the segment the noise is estimated from
    noise_method: str = "diff"  # "diff": MAD of night-to-night changes; "level": MAD of baseline
    min_nights: int = 3  # fewer valid nights -> insufficient_data
    rel_min: float = 0.05
    z_min: float = 4.0
    sigma_floor: float = 0.005  # sigma >= this fraction of the baseline
    short_sigma_floor: float = 0.02  # under K nights, when no previous segment lends its sigma
    info_rel: float = 0.10  # the relative rule of insufficient_data (information only)
    big_ratio: float = 1.25
    big_z: float = 8.0
    work_tol: float = 0.02
    clock_tol: float = 0.02
    ridge_band: float = 0.15
    flip_nights: int = 2
    shift_fraction: float = 0.3
    shift_min_kernels: int = 5
    settings: tuple[str, ...] = ("clock_control", "cache_control")
    segment_fields: tuple[str, ...] = ("gpu_uuid", "driver_version", "cuda_version",
                                       "ncu_version", "mig_mode", "ceiling_source", "convention")
    per_kernel: tuple[tuple[str, Mapping], ...] = ()
    # kernels renamed by a code change: regular expression -> replacement on the full name, as
    # roofline compare's --rename (roofline.nightly.kernel_match: an explicit map wins over inferred evidence)
    rename: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        compile_rename(dict(self.rename))  # a bad pattern: ValueError now, not on the night it is used
        if not 1 <= self.min_nights <= self.window:
            raise ValueError(f"need 1 <= min_nights ({self.min_nights}) <= window ({self.window})")
        if min(self.rel_min, self.z_min, self.sigma_floor, self.work_tol, self.ridge_band) < 0:
            raise ValueError("tracking thresholds must be non-negative")
        if self.noise_window < self.window or self.noise_method not in ("diff", "level"):
            raise ValueError("need noise_window >= window and noise_method 'diff' or 'level'")
        if self.big_ratio <= 1:
            raise ValueError(f"big_ratio must exceed 1, got {self.big_ratio}")

    @classmethod
    def from_mapping(cls, data: Mapping | None) -> DecisionParams:
        """Build from a mapping (config, JSON); unknown keys are errors."""
        data = dict(data or {})
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown tracking parameters {unknown}; known: {sorted(names)}")
        for name in ("settings", "segment_fields"):
            if name in data:
                data[name] = tuple(data[name])
        if "rename" in data:
            data["rename"] = tuple((str(k), str(v)) for k, v in dict(data["rename"]).items())
        if "per_kernel" in data:
            overrides = dict(data["per_kernel"]).items()
            data["per_kernel"] = tuple((str(k), dict(v)) for k, v in overrides)
        return cls(**data)

    def for_kernel(self, name: str) -> DecisionParams:
        """These parameters with the first ``per_kernel`` override whose regex matches applied."""
        for pattern, overrides in self.per_kernel:
            if re.search(pattern, name):
                return dataclasses.replace(self, per_kernel=(), **dict(overrides))
        return self
