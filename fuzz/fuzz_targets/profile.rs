//! Inference profile: a whole file read at once and the same file split in two at a point
//! derived from its length, then requests, summary, percentiles, errors and snapshots.
#![no_main]

use candle_trace_fuzz::exercise_profile;
use candle_trace_schema::format::profile::{read_profile, ProfileReader};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let doc = read_profile(data);
    exercise_profile(&doc, data);
    // The same bytes pushed in two pieces read the same.
    let cut = data
        .first()
        .map_or(0, |&b| usize::from(b) % (data.len() + 1));
    let mut reader = ProfileReader::new();
    reader.push(&data[..cut]);
    reader.push(&data[cut..]);
    assert_eq!(reader.finish(), doc);
});
