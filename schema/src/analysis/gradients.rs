//! Gradient health: counts per state, the parameters worth a look, and the same counts per
//! module with a one-sentence finding about where gradients stop.
//!
//! Grouping rules (SCHEMA.md has none):
//! - A parameter's **module** is its `key` without the last `.`-segment
//!   (`model.layers.0.self_attn.q_proj.weight` → `model.layers.0.self_attn.q_proj`); a key
//!   without a `.` belongs to the module `""` (the top level). Parameters of different `root`s
//!   are different groups.
//! - Groups are in order of first appearance in the file.
//! - A group's **flow** is `all_missing` when every parameter of it is missing, `partly_missing`
//!   when some are, `none_missing` otherwise (zero and non-finite gradients did arrive).

use crate::analysis::sort;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use hashbrown::HashMap;
use serde::{Deserialize, Serialize};

use crate::format::events::{Gradient, GradientState};
use crate::format::records::Lined;

/// Number of parameters in each gradient state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GradientCounts {
    /// Finite, non-zero gradients.
    pub present: u64,
    /// Parameters without a gradient.
    pub missing: u64,
    /// All-zero gradients.
    pub zero: u64,
    /// Gradients with NaN or infinity.
    pub non_finite: u64,
}

impl GradientCounts {
    /// Count the states of `gradients`.
    pub fn of(gradients: &[Lined<Gradient>]) -> Self {
        let mut c = GradientCounts::default();
        for g in gradients {
            match g.state {
                GradientState::Present => c.present += 1,
                GradientState::Missing => c.missing += 1,
                GradientState::Zero => c.zero += 1,
                GradientState::NonFinite => c.non_finite += 1,
            }
        }
        c
    }

    /// The count for one state.
    pub fn get(&self, state: GradientState) -> u64 {
        match state {
            GradientState::Present => self.present,
            GradientState::Missing => self.missing,
            GradientState::Zero => self.zero,
            GradientState::NonFinite => self.non_finite,
        }
    }

    /// Parameters whose gradient is missing, zero or non-finite.
    pub fn problems(&self) -> u64 {
        self.missing + self.zero + self.non_finite
    }
}

/// Whether a module's parameters received gradients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GradientFlow {
    /// No parameter of the module has a gradient.
    AllMissing,
    /// Some parameters have one, some do not.
    PartlyMissing,
    /// Every parameter has one (possibly zero or non-finite).
    NoneMissing,
}

impl GradientFlow {
    /// The snake_case spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            GradientFlow::AllMissing => "all_missing",
            GradientFlow::PartlyMissing => "partly_missing",
            GradientFlow::NoneMissing => "none_missing",
        }
    }
}

/// The gradients of one module (see the module docs for the grouping).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GradientGroup {
    /// `root` of its parameters.
    pub root: String,
    /// The parameter keys without their last `.`-segment (`""`: the top level).
    pub module: String,
    /// Parameters in the module.
    pub params: u64,
    /// Their states.
    pub counts: GradientCounts,
    /// Whether gradients reached the module.
    pub flow: GradientFlow,
}

/// The module of a parameter key: the key without its last `.`-segment.
pub fn module_of(key: &str) -> &str {
    key.rfind('.').map_or("", |i| &key[..i])
}

/// Gradients grouped by (root, module), in order of first appearance.
pub fn gradient_groups(gradients: &[Lined<Gradient>]) -> Vec<GradientGroup> {
    let mut index: HashMap<(&str, &str), usize> = HashMap::new();
    let mut groups: Vec<GradientGroup> = Vec::new();
    for g in gradients {
        let module = module_of(&g.key);
        let i = *index.entry((g.root.as_str(), module)).or_insert_with(|| {
            groups.push(GradientGroup {
                root: g.root.clone(),
                module: String::from(module),
                params: 0,
                counts: GradientCounts::default(),
                flow: GradientFlow::NoneMissing,
            });
            groups.len() - 1
        });
        let group = &mut groups[i];
        group.params += 1;
        match g.state {
            GradientState::Present => group.counts.present += 1,
            GradientState::Missing => group.counts.missing += 1,
            GradientState::Zero => group.counts.zero += 1,
            GradientState::NonFinite => group.counts.non_finite += 1,
        }
    }
    for group in &mut groups {
        group.flow = if group.counts.missing == 0 {
            GradientFlow::NoneMissing
        } else if group.counts.missing == group.params {
            GradientFlow::AllMissing
        } else {
            GradientFlow::PartlyMissing
        };
    }
    groups
}

/// A module's name for a sentence: `(top level)` for `""`.
fn shown(module: &str) -> &str {
    if module.is_empty() {
        "(top level)"
    } else {
        module
    }
}

/// `a, b and c`; more than `max` names are cut to the first `max − 1`, `…` and the last.
fn name_list(names: &[&str], max: usize) -> String {
    let names: Vec<&str> = if names.len() > max && max >= 2 {
        let mut cut: Vec<&str> = names[..max - 1].to_vec();
        cut.push("…");
        cut.extend(names.last());
        cut
    } else {
        names.to_vec()
    };
    match names.split_last() {
        None => String::new(),
        Some((last, [])) => String::from(*last),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

/// The longest run of leading `.`-segments shared by all `names`, with its trailing `.`
/// (`model.`), when it is shorter than every name; `None` otherwise.
fn common_prefix<'a>(names: &[&'a str]) -> Option<&'a str> {
    let (first, rest) = names.split_first()?;
    let mut len = first.len();
    for n in rest {
        let shared = first
            .bytes()
            .zip(n.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        len = len.min(shared);
    }
    // Back off to the end of a whole segment (just after a `.`).
    let prefix = &first[..len];
    let cut = prefix.rfind('.').map(|i| i + 1)?;
    let prefix = &first[..cut];
    names
        .iter()
        .all(|n| n.len() > prefix.len())
        .then_some(prefix)
}

/// One factual sentence about where gradients arrived, from [`gradient_groups`]; `None`
/// without gradients. It states how many parameters have no gradient, which modules received
/// gradients, and how many modules received none (with their shared name prefix and a few
/// names); modules with only some parameters missing are named apart. How many gradients
/// arrived zero or non-finite is said beside the missing ones, as such a module still counts
/// among those that receive gradients. It does not guess the
/// model's layer order: modules are listed in file order.
pub fn gradient_finding(groups: &[GradientGroup]) -> Option<String> {
    let params: u64 = groups.iter().map(|g| g.params).sum();
    if params == 0 {
        return None;
    }
    let missing: u64 = groups.iter().map(|g| g.counts.missing).sum();
    let zero: u64 = groups.iter().map(|g| g.counts.zero).sum();
    let non_finite: u64 = groups.iter().map(|g| g.counts.non_finite).sum();
    let of_flow = |flow: GradientFlow| -> Vec<&str> {
        groups
            .iter()
            .filter(|g| g.flow == flow)
            .map(|g| shown(&g.module))
            .collect()
    };
    let (none, partly, all) = (
        of_flow(GradientFlow::NoneMissing),
        of_flow(GradientFlow::PartlyMissing),
        of_flow(GradientFlow::AllMissing),
    );
    if missing == 0 {
        let mut s = format!("all {params} parameters have a gradient");
        if zero + non_finite > 0 {
            s.push_str(&format!(" ({zero} zero, {non_finite} non-finite)"));
        }
        return Some(s);
    }
    let mut s = if missing == params {
        format!("none of the {params} parameters has a gradient")
    } else {
        let verb = if missing == 1 { "has" } else { "have" };
        format!("{missing} of {params} parameters {verb} no gradient")
    };
    if zero + non_finite > 0 {
        // The modules named below as receiving gradients may receive only these.
        s.push_str(&format!(
            " and {} a gradient that cannot train ({zero} zero, {non_finite} non-finite)",
            zero + non_finite
        ));
    }
    let receivers: Vec<&str> = none.iter().chain(&partly).copied().collect();
    if !receivers.is_empty() {
        let only = if all.is_empty() { "" } else { "only " };
        let verb = if receivers.len() == 1 {
            "receives"
        } else {
            "receive"
        };
        s.push_str(&format!(
            "; {only}{} {verb} gradients",
            name_list(&receivers, 5)
        ));
    }
    if !all.is_empty() {
        let modules = if all.len() == 1 { "module" } else { "modules" };
        let under = common_prefix(&all).map_or(String::new(), |p| {
            format!(" under {}", p.trim_end_matches('.'))
        });
        s.push_str(&format!(
            "; no gradient reaches {} {modules}{under}: {}",
            all.len(),
            name_list(&all, 4)
        ));
    }
    if !partly.is_empty() {
        s.push_str(&format!(
            "; some parameters missing in {}",
            name_list(&partly, 5)
        ));
    }
    Some(s)
}

/// Indices of gradients sorted for review: problems first (non-finite, missing, zero), then
/// present ones by norm, largest first; ties by `root`/`key`.
pub fn gradients_for_review(gradients: &[Lined<Gradient>]) -> Vec<usize> {
    fn rank(s: GradientState) -> u8 {
        match s {
            GradientState::NonFinite => 0,
            GradientState::Missing => 1,
            GradientState::Zero => 2,
            GradientState::Present => 3,
        }
    }
    let mut order: Vec<usize> = (0..gradients.len()).collect();
    sort::by(&mut order, |&a, &b| {
        let (ga, gb) = (&gradients[a], &gradients[b]);
        rank(ga.state)
            .cmp(&rank(gb.state))
            .then_with(|| {
                let (na, nb) = (ga.norm.unwrap_or(0.0), gb.norm.unwrap_or(0.0));
                nb.total_cmp(&na)
            })
            .then_with(|| (&ga.root, &ga.key).cmp(&(&gb.root, &gb.key)))
    });
    order
}

/// One decade of the norm histogram: norms in `[10^exponent, 10^(exponent+1))`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NormBin {
    /// Lower bound as a power of ten.
    pub exponent: i32,
    /// Norms in the decade.
    pub count: u64,
}

/// Gradient norms on a log scale.
///
/// Every finite norm > 0 falls in its [`decade`] (`floor(log10(norm))`, exactly); bins run contiguously from
/// the smallest to the largest decade seen (empty decades included). Norms of exactly 0 are
/// counted in `zero`; NaN, infinite and negative norms in `not_finite`; records without a norm
/// in `without_norm`. The state is not consulted: the histogram shows the norms as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NormHistogram {
    /// Decades, ascending.
    pub bins: Vec<NormBin>,
    /// Norms equal to 0.
    pub zero: u64,
    /// NaN, infinite or negative norms.
    pub not_finite: u64,
    /// Records without a norm.
    pub without_norm: u64,
}

/// The decade of a finite `x > 0`: the `e` with `p(e) ≤ x < p(e + 1)`, where `p(e)` is the
/// f64 nearest to 10^e (the value of the literal `1e{e}`). Exact at powers of ten, unlike a
/// floating-point `log10`.
pub fn decade(x: f64) -> i32 {
    fn p(e: i32) -> f64 {
        // "1e{e}" is a valid float literal for every i32, so parsing cannot fail.
        alloc::format!("1e{e}").parse().unwrap_or(f64::NAN)
    }
    // Binary exponent × log10(2) is within one of the answer for normal numbers; the loops fix
    // it (and walk the few extra steps subnormals need).
    let bexp = ((x.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    let mut e = (f64::from(bexp) * core::f64::consts::LOG10_2) as i32;
    while e > -330 && p(e) > x {
        e -= 1;
    }
    while e < 310 && p(e + 1) <= x {
        e += 1;
    }
    e
}

/// The norm histogram of `gradients`.
pub fn norm_histogram(gradients: &[Lined<Gradient>]) -> NormHistogram {
    let mut h = NormHistogram::default();
    let mut decades: Vec<i32> = Vec::new();
    for g in gradients {
        match g.norm {
            None => h.without_norm += 1,
            Some(0.0) => h.zero += 1,
            Some(n) if !n.is_finite() || n < 0.0 => h.not_finite += 1,
            Some(n) => decades.push(decade(n)),
        }
    }
    if let (Some(&lo), Some(&hi)) = (decades.iter().min(), decades.iter().max()) {
        h.bins = (lo..=hi)
            .map(|exponent| NormBin {
                exponent,
                count: decades.iter().filter(|&&d| d == exponent).count() as u64,
            })
            .collect();
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::events::GradientState;
    use alloc::string::String;

    fn g(norm: Option<f64>) -> Lined<Gradient> {
        Lined::new(
            1,
            Gradient {
                event_id: String::new(),
                root: String::from("r"),
                key: String::from("k"),
                state: GradientState::Present,
                norm,
                storage_bytes: None,
            },
        )
    }

    #[test]
    fn decades_are_exact_at_powers_of_ten() {
        assert_eq!(decade(1.0), 0);
        assert_eq!(decade(0.999_999), -1);
        assert_eq!(decade(1000.0), 3);
        assert_eq!(decade(999.999), 2);
        assert_eq!(decade(0.001), -3);
        assert_eq!(decade(1e-300), -300);
        assert_eq!(decade(5e-324), -324);
        assert_eq!(decade(f64::MAX), 308);
    }

    #[test]
    fn histogram_bins_are_contiguous() {
        let h = norm_histogram(&[
            g(Some(0.5)),
            g(Some(0.06)),
            g(Some(20.0)),
            g(Some(0.0)),
            g(Some(f64::NAN)),
            g(None),
            g(Some(0.7)),
        ]);
        let bins: alloc::vec::Vec<(i32, u64)> =
            h.bins.iter().map(|b| (b.exponent, b.count)).collect();
        assert_eq!(bins, alloc::vec![(-2, 1), (-1, 2), (0, 0), (1, 1)]);
        assert_eq!((h.zero, h.not_finite, h.without_norm), (1, 1, 1));
    }

    fn grad(root: &str, key: &str, state: GradientState) -> Lined<Gradient> {
        Lined::new(
            1,
            Gradient {
                event_id: String::new(),
                root: String::from(root),
                key: String::from(key),
                state,
                norm: None,
                storage_bytes: None,
            },
        )
    }

    /// A 2-layer Llama's VarMap keys, sorted; only `lm_head.weight` has a gradient.
    fn llama() -> alloc::vec::Vec<Lined<Gradient>> {
        let mut keys = alloc::vec![
            String::from("lm_head.weight"),
            String::from("model.embed_tokens.weight")
        ];
        for l in 0..2 {
            for p in [
                "input_layernorm",
                "mlp.down_proj",
                "mlp.gate_proj",
                "mlp.up_proj",
                "post_attention_layernorm",
                "self_attn.k_proj",
                "self_attn.o_proj",
                "self_attn.q_proj",
                "self_attn.v_proj",
            ] {
                keys.push(alloc::format!("model.layers.{l}.{p}.weight"));
            }
        }
        keys.push(String::from("model.norm.weight"));
        keys.iter()
            .map(|k| {
                let state = if k == "lm_head.weight" {
                    GradientState::Present
                } else {
                    GradientState::Missing
                };
                grad("varmap", k, state)
            })
            .collect()
    }

    #[test]
    fn llama_groups_and_finding_by_hand() {
        let gradients = llama();
        // 1 + 1 + 2 × 9 + 1 = 21 parameters, each `<module>.weight`: 21 groups of one.
        assert_eq!(gradients.len(), 21);
        let groups = gradient_groups(&gradients);
        assert_eq!(groups.len(), 21);
        assert_eq!(groups[0].module, "lm_head");
        assert_eq!(groups[0].flow, GradientFlow::NoneMissing);
        assert_eq!(groups[0].counts.present, 1);
        assert_eq!(groups[3].module, "model.layers.0.mlp.down_proj");
        assert_eq!(groups[20].module, "model.norm");
        assert!(groups[1..]
            .iter()
            .all(|g| g.flow == GradientFlow::AllMissing && g.params == 1));
        // 20 missing of 21; receivers: lm_head; 20 modules without, all under `model.`; the
        // list keeps the first 3, then … and the last.
        assert_eq!(
            gradient_finding(&groups).unwrap(),
            "20 of 21 parameters have no gradient; only lm_head receives gradients; \
             no gradient reaches 20 modules under model: model.embed_tokens, \
             model.layers.0.input_layernorm, model.layers.0.mlp.down_proj, … and model.norm"
        );
    }

    #[test]
    fn groups_split_by_last_segment_and_flow() {
        let gradients = [
            grad("r", "enc.fc.weight", GradientState::Present),
            grad("r", "enc.fc.bias", GradientState::Missing),
            grad("r", "head.weight", GradientState::Zero),
            grad("r", "scale", GradientState::Missing),
            grad("other", "head.weight", GradientState::NonFinite),
            grad("r", "enc.fc.gamma", GradientState::Missing),
        ];
        let groups = gradient_groups(&gradients);
        let rows: alloc::vec::Vec<(&str, &str, u64, u64, u64, GradientFlow)> = groups
            .iter()
            .map(|g| {
                (
                    g.root.as_str(),
                    g.module.as_str(),
                    g.params,
                    g.counts.present,
                    g.counts.missing,
                    g.flow,
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                ("r", "enc.fc", 3, 1, 2, GradientFlow::PartlyMissing),
                ("r", "head", 1, 0, 0, GradientFlow::NoneMissing),
                ("r", "", 1, 0, 1, GradientFlow::AllMissing),
                ("other", "head", 1, 0, 0, GradientFlow::NoneMissing),
            ]
        );
        // 3 of 6 missing, and of the 3 with one r's head is zero and other's non-finite;
        // receivers: head, head (two roots), then the partly module enc.fc; one module without
        // any: the top level (no shared prefix with one name).
        assert_eq!(
            gradient_finding(&groups).unwrap(),
            "3 of 6 parameters have no gradient and 2 a gradient that cannot train (1 zero, \
             1 non-finite); only head, head and enc.fc receive gradients; \
             no gradient reaches 1 module: (top level); some parameters missing in enc.fc"
        );
        assert_eq!(module_of("a.b.c"), "a.b");
        assert_eq!(module_of("abc"), "");
        assert_eq!(gradient_finding(&[]), None);
    }

    #[test]
    fn findings_when_all_or_none_arrive() {
        let all_missing = [
            grad("r", "a.x.w", GradientState::Missing),
            grad("r", "a.y.w", GradientState::Missing),
        ];
        assert_eq!(
            gradient_finding(&gradient_groups(&all_missing)).unwrap(),
            "none of the 2 parameters has a gradient; no gradient reaches 2 modules under a: a.x and a.y"
        );
        let arrived = [
            grad("r", "a.w", GradientState::Present),
            grad("r", "b.w", GradientState::Zero),
        ];
        assert_eq!(
            gradient_finding(&gradient_groups(&arrived)).unwrap(),
            "all 2 parameters have a gradient (1 zero, 0 non-finite)"
        );
        assert_eq!(common_prefix(&["model.a", "model.b"]), Some("model."));
        assert_eq!(common_prefix(&["model.ab", "model.ac"]), Some("model."));
        assert_eq!(common_prefix(&["model", "model.a"]), None);
        assert_eq!(common_prefix(&["x.a"]), Some("x."));
    }
}
