//! The small enums that cross as a byte ([`Coded`]): each lists its variants once, in the
//! order of their codes.

use candle_trace_schema::format::detect::Format;
use candle_trace_schema::format::diagnostics::{Category, Severity};
use candle_trace_schema::format::events::{
    GradientState, MemoryAction, Pass, Phase, SpanKind, TensorCategory, TimingMode,
};
use candle_trace_schema::format::tracks::ChromeForm;

use super::columns::Coded;

macro_rules! coded {
    ($t:ty, $what:literal, $all:expr) => {
        impl Coded for $t {
            const ALL: &'static [$t] = &$all;
            const WHAT: &'static str = $what;
        }
    };
}

coded!(
    Category,
    "category",
    [
        Category::Syntax,
        Category::Truncated,
        Category::UnknownKind,
        Category::MissingField,
        Category::WrongType,
        Category::InvalidValue,
        Category::Meta,
        Category::Duplicate,
        Category::Reference,
        Category::Cycle,
        Category::Unclosed,
        Category::Measured,
        Category::Memory,
        Category::Format,
        Category::Capture,
    ]
);
coded!(Severity, "severity", [Severity::Warning, Severity::Error]);
coded!(
    MemoryAction,
    "memory action",
    [MemoryAction::Alloc, MemoryAction::Free]
);
coded!(Phase, "phase", [Phase::Train, Phase::Infer]);
coded!(
    TimingMode,
    "timing mode",
    [TimingMode::Host, TimingMode::DeviceSynchronized]
);
coded!(
    ChromeForm,
    "Chrome form",
    [ChromeForm::Array, ChromeForm::Object]
);
coded!(
    Format,
    "format",
    [Format::Trace, Format::Profile, Format::Chrome]
);
coded!(SpanKind, "span kind", SpanKind::ALL);
coded!(Pass, "step", Pass::ALL);
coded!(TensorCategory, "tensor category", TensorCategory::ALL);
coded!(GradientState, "gradient state", GradientState::ALL);

#[cfg(test)]
mod tests {
    use super::super::columns::{code, opt_code, opt_variant, variant};
    use super::*;

    fn each_code_names_one_variant<T: Coded + core::fmt::Debug>() {
        for (i, v) in T::ALL.iter().enumerate() {
            assert_eq!(code(v), i as u8, "{v:?}");
            assert_eq!(variant::<T>(i as u8).unwrap(), *v);
            assert_eq!(opt_code(Some(v)), i as u8 + 1);
            assert_eq!(opt_variant::<T>(i as u8 + 1).unwrap(), Some(*v));
        }
        assert!(variant::<T>(T::ALL.len() as u8).is_err());
        assert!(opt_variant::<T>(T::ALL.len() as u8 + 1).is_err());
        assert_eq!(opt_code::<T>(None), 0);
        assert_eq!(opt_variant::<T>(0).unwrap(), None);
    }

    #[test]
    fn the_byte_codes_of_small_enums_match_their_lists() {
        each_code_names_one_variant::<Category>();
        each_code_names_one_variant::<Severity>();
        each_code_names_one_variant::<MemoryAction>();
        each_code_names_one_variant::<Phase>();
        each_code_names_one_variant::<TimingMode>();
        each_code_names_one_variant::<ChromeForm>();
        each_code_names_one_variant::<Format>();
        each_code_names_one_variant::<SpanKind>();
        each_code_names_one_variant::<Pass>();
        each_code_names_one_variant::<TensorCategory>();
        each_code_names_one_variant::<GradientState>();
        // Every category is listed: each `as_str` once.
        let mut names: Vec<&str> = Category::ALL.iter().map(|c| c.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 15);
        assert_eq!(opt_code(Some(&Pass::Optimizer)), 3);
    }
}
