"""Plans other load tools wrote, converted to Horde plans (``horde import``): JMeter test plans,
yandex-tank and pandora configs with their ammo, and HAR recordings.

A conversion reads its source, sends no load, and gives a Horde plan with what it did to each
part of the source (:mod:`horde.conversion.findings`): converted, approximated, or not converted,
each at its place in the source file. Nothing of the source is dropped without a finding.
"""

from horde.conversion.findings import Conversion, Finding, Outcome

__all__ = ["Conversion", "Finding", "Outcome"]
