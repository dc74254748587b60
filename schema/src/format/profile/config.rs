//! Detail levels and the profiling config (SCHEMA.md §2, "Detail levels").

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// How much the inference profiler records, from nothing to everything.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DetailLevel {
    /// Profiling disabled (the default).
    #[default]
    Off,
    /// Request-level events.
    Basic,
    /// Plus resource accounting.
    Resource,
    /// Plus engine token timing.
    Latency,
    /// Kernel-level detail (diagnostic only).
    Kernel,
    /// Debug detail (diagnostic only).
    Debug,
    /// Replay bundles (diagnostic only).
    Replay,
    /// Verification runs (diagnostic only).
    Verify,
    /// Everything (diagnostic only).
    Full,
}

impl DetailLevel {
    /// Every level, in SCHEMA.md order.
    pub const ALL: [DetailLevel; 9] = [
        DetailLevel::Off,
        DetailLevel::Basic,
        DetailLevel::Resource,
        DetailLevel::Latency,
        DetailLevel::Kernel,
        DetailLevel::Debug,
        DetailLevel::Replay,
        DetailLevel::Verify,
        DetailLevel::Full,
    ];

    /// The lowercase spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            DetailLevel::Off => "off",
            DetailLevel::Basic => "basic",
            DetailLevel::Resource => "resource",
            DetailLevel::Latency => "latency",
            DetailLevel::Kernel => "kernel",
            DetailLevel::Debug => "debug",
            DetailLevel::Replay => "replay",
            DetailLevel::Verify => "verify",
            DetailLevel::Full => "full",
        }
    }

    /// Parse a level case-insensitively, with surrounding whitespace trimmed: `" Latency\n"` is
    /// [`DetailLevel::Latency`].
    pub fn parse(s: &str) -> Option<DetailLevel> {
        let s = s.trim();
        DetailLevel::ALL
            .into_iter()
            .find(|level| level.as_str().eq_ignore_ascii_case(s))
    }

    /// True for `kernel debug replay verify full`: events recorded at these levels are for
    /// diagnosis only.
    pub fn is_diagnostic_only(self) -> bool {
        matches!(
            self,
            DetailLevel::Kernel
                | DetailLevel::Debug
                | DetailLevel::Replay
                | DetailLevel::Verify
                | DetailLevel::Full
        )
    }

    /// True for `latency kernel replay verify full`: these levels capture engine token timing.
    pub fn captures_engine_token_timing(self) -> bool {
        matches!(
            self,
            DetailLevel::Latency
                | DetailLevel::Kernel
                | DetailLevel::Replay
                | DetailLevel::Verify
                | DetailLevel::Full
        )
    }
}

impl fmt::Display for DetailLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for DetailLevel {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for DetailLevel {
    /// Accepts the same spellings as [`DetailLevel::parse`].
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        DetailLevel::parse(&s).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown detail level `{s}`, expected one of off, basic, resource, latency, \
                 kernel, debug, replay, verify, full"
            ))
        })
    }
}

/// The default sample rate: one request in a hundred.
pub const DEFAULT_SAMPLE_RATE: f64 = 0.01;

/// How the inference profiler is configured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfilingConfig {
    /// What to record.
    #[serde(default)]
    pub detail: DetailLevel,
    /// Fraction of requests profiled; finite and within [0, 1]. Default 0.01.
    #[serde(default = "default_sample_rate")]
    pub sample_rate: f64,
    /// Where profiles are written; at least one non-blank path unless `detail` is `off`.
    #[serde(default)]
    pub outputs: Vec<String>,
}

fn default_sample_rate() -> f64 {
    DEFAULT_SAMPLE_RATE
}

impl Default for ProfilingConfig {
    fn default() -> Self {
        ProfilingConfig {
            detail: DetailLevel::Off,
            sample_rate: DEFAULT_SAMPLE_RATE,
            outputs: Vec::new(),
        }
    }
}

impl ProfilingConfig {
    /// Every broken rule, as messages naming the field; empty when the config is valid.
    pub fn validate(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.sample_rate.is_finite() || !(0.0..=1.0).contains(&self.sample_rate) {
            out.push(format!(
                "`sample_rate` must be finite and within [0, 1], found {}",
                self.sample_rate
            ));
        }
        if self.detail != DetailLevel::Off && self.outputs.iter().all(|p| p.trim().is_empty()) {
            out.push(format!(
                "`outputs` must name at least one output path when `detail` is `{}`",
                self.detail
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn parse_is_case_insensitive_and_trims() {
        assert_eq!(DetailLevel::parse(" Latency\n"), Some(DetailLevel::Latency));
        assert_eq!(DetailLevel::parse("FULL"), Some(DetailLevel::Full));
        assert_eq!(DetailLevel::parse("\toff "), Some(DetailLevel::Off));
        assert_eq!(DetailLevel::parse("bench"), None);
        assert_eq!(DetailLevel::parse(""), None);
        for level in DetailLevel::ALL {
            assert_eq!(DetailLevel::parse(level.as_str()), Some(level));
        }
        let level: DetailLevel = serde_json::from_str(r#"" Kernel ""#).unwrap();
        assert_eq!(level, DetailLevel::Kernel);
        assert!(serde_json::from_str::<DetailLevel>(r#""loud""#).is_err());
        assert_eq!(
            serde_json::to_string(&DetailLevel::Verify).unwrap(),
            r#""verify""#
        );
    }

    #[test]
    fn level_classes_follow_the_schema() {
        let diagnostic: Vec<&str> = DetailLevel::ALL
            .into_iter()
            .filter(|l| l.is_diagnostic_only())
            .map(DetailLevel::as_str)
            .collect();
        assert_eq!(
            diagnostic,
            vec!["kernel", "debug", "replay", "verify", "full"]
        );
        let timing: Vec<&str> = DetailLevel::ALL
            .into_iter()
            .filter(|l| l.captures_engine_token_timing())
            .map(DetailLevel::as_str)
            .collect();
        assert_eq!(
            timing,
            vec!["latency", "kernel", "replay", "verify", "full"]
        );
    }

    #[test]
    fn config_rules() {
        let default = ProfilingConfig::default();
        assert_eq!(default.sample_rate, 0.01);
        assert!(default.validate().is_empty());
        let from_json: ProfilingConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(from_json, default);

        let basic = ProfilingConfig {
            detail: DetailLevel::Basic,
            ..ProfilingConfig::default()
        };
        assert_eq!(
            basic.validate(),
            vec!["`outputs` must name at least one output path when `detail` is `basic`"]
        );
        let blank = ProfilingConfig {
            outputs: vec![" ".into()],
            ..basic.clone()
        };
        assert_eq!(blank.validate().len(), 1);
        let ok = ProfilingConfig {
            outputs: vec!["profile.jsonl".into()],
            ..basic.clone()
        };
        assert!(ok.validate().is_empty());

        for rate in [0.0, 1.0, 0.5] {
            let c = ProfilingConfig {
                sample_rate: rate,
                ..ok.clone()
            };
            assert!(c.validate().is_empty(), "{rate}");
        }
        for rate in [-0.01, 1.5, f64::NAN, f64::INFINITY] {
            let c = ProfilingConfig {
                sample_rate: rate,
                ..ok.clone()
            };
            let v = c.validate();
            assert_eq!(v.len(), 1, "{rate}");
            assert!(v[0].starts_with("`sample_rate` must be finite"), "{}", v[0]);
        }
        // Both rules broken at once.
        let both = ProfilingConfig {
            sample_rate: 2.0,
            ..basic
        };
        assert_eq!(both.validate().len(), 2);
    }
}
