//! `query --kind requests | iterations | resources | latency`: the inference profile's kinds.

use std::io::Write;

use candle_trace_schema::analysis::histogram::Histogram;
use candle_trace_schema::analysis::units::format_ns;
use candle_trace_schema::format::profile::{attribute, ProfileDocument};
use serde_json::json;

use super::Options;
use crate::table::{Align, Table};
use crate::write_json;

pub(super) fn requests(
    doc: &ProfileDocument,
    opts: &Options,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let requests = doc.requests();
    if opts.json {
        let rows: Vec<&_> = requests.iter().take(opts.limit).collect();
        return write_json(out, &json!({ "requests": rows }));
    }
    let mut table = Table::new(&[
        ("request", Align::Left),
        ("status", Align::Left),
        ("model", Align::Left),
        ("duration", Align::Right),
        ("TTFT", Align::Right),
        ("tokens", Align::Right),
        ("mean ITL", Align::Right),
        ("events", Align::Right),
        ("invalid", Align::Right),
    ]);
    let us = |v: Option<u64>| v.map_or(String::from("–"), |v| format_ns(v.saturating_mul(1_000)));
    for r in requests.iter().take(opts.limit) {
        table.row(vec![
            r.request_id.clone(),
            r.status.as_str().to_string(),
            r.model.clone().unwrap_or_default(),
            us(r.duration_us),
            us(r.ttft_us),
            r.output_tokens.map_or(String::from("–"), |t| t.to_string()),
            us(r.itl_us_avg),
            r.event_count.to_string(),
            r.invalid_event_count.to_string(),
        ]);
    }
    write!(out, "{}", table.render())?;
    Ok(())
}

pub(super) fn iterations(
    doc: &ProfileDocument,
    opts: &Options,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let all = doc.iterations();
    if opts.json {
        let rows: Vec<&_> = all.iterations.iter().take(opts.limit).collect();
        return write_json(
            out,
            &json!({
                "iterations": rows,
                "count": all.iterations.len(),
                "batch_size": all.batch_size,
                "duration_ns": all.duration_ns,
                "unreadable": all.unreadable,
            }),
        );
    }
    if all.iterations.is_empty() {
        writeln!(
            out,
            "no batched forwards (an engine's `iteration` events: capture's `Engine::forward`)"
        )?;
        return Ok(());
    }
    match (&all.batch_size, &all.duration_ns) {
        (Some(b), Some(d)) => writeln!(
            out,
            "{} forward(s): batch size p50 {}, p90 {}; forward time p50 {}, p90 {}",
            all.iterations.len(),
            b.p50,
            b.p90,
            format_ns(d.p50),
            format_ns(d.p90)
        )?,
        _ => writeln!(out, "{} forward(s)", all.iterations.len())?,
    }
    let origin = all.iterations[0].start_unix_nanos;
    let mut table = Table::new(&[
        ("engine", Align::Left),
        ("iteration", Align::Right),
        ("start", Align::Right),
        ("duration", Align::Right),
        ("batch", Align::Right),
        ("prefill", Align::Right),
        ("decode", Align::Right),
        ("committed", Align::Right),
        ("tokens/s", Align::Right),
        ("status", Align::Left),
    ]);
    for it in all.iterations.iter().take(opts.limit) {
        let start = u64::try_from(it.start_unix_nanos.saturating_sub(origin)).unwrap_or(0);
        table.row(vec![
            it.engine.clone(),
            it.iteration.to_string(),
            format!("+{}", format_ns(start)),
            format_ns(it.duration_ns),
            it.batch_size.to_string(),
            it.prefill_tokens.to_string(),
            it.decode_tokens.to_string(),
            it.committed_tokens.to_string(),
            it.tokens_per_s.map_or(String::from("–"), |t| t.to_string()),
            it.status.clone(),
        ]);
    }
    write!(out, "{}", table.render())?;
    if all.iterations.len() > opts.limit {
        writeln!(
            out,
            "… {} more (--limit)",
            all.iterations.len() - opts.limit
        )?;
    }
    if all.unreadable > 0 {
        writeln!(
            out,
            "{} iteration event(s) could not be placed",
            all.unreadable
        )?;
    }
    Ok(())
}

pub(super) fn resources(
    doc: &ProfileDocument,
    opts: &Options,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let all = doc.resources();
    if opts.json {
        return write_json(
            out,
            &json!({ "resources": all.kinds, "unreadable": all.unreadable }),
        );
    }
    if all.kinds.is_empty() {
        writeln!(out, "no resource events")?;
        return Ok(());
    }
    for usage in &all.kinds {
        let capacity = usage
            .capacity
            .map_or(String::from("capacity not stated"), |c| {
                format!("capacity {c}")
            });
        let peak = usage
            .peak
            .as_ref()
            .map_or(String::from("no level stated"), |p| {
                format!("peak {}", p.level)
            });
        writeln!(
            out,
            "{}: {capacity}, {peak}; {} deferral(s), {} rejection(s), {} underflow(s), {} never released",
            usage.resource_kind,
            usage.deferrals,
            usage.rejections,
            usage.underflows.len(),
            usage.leaks.len()
        )?;
        let origin = usage.occupancy.iter().filter_map(|p| p.at_unix_nanos).min();
        if !usage.occupancy.is_empty() {
            writeln!(out, "\noccupancy")?;
            let mut table = Table::new(&[
                ("at", Align::Right),
                ("level", Align::Right),
                ("capacity", Align::Right),
                ("action", Align::Left),
                ("request", Align::Left),
                ("line", Align::Right),
            ]);
            for p in usage.occupancy.iter().take(opts.limit) {
                let at = match (p.at_unix_nanos, origin) {
                    (Some(t), Some(o)) => {
                        format!("+{}", format_ns(u64::try_from(t - o).unwrap_or(0)))
                    }
                    _ => String::from("–"),
                };
                table.row(vec![
                    at,
                    p.level.to_string(),
                    p.capacity.map_or(String::from("–"), |c| c.to_string()),
                    p.action.as_str().to_string(),
                    p.holder.clone(),
                    p.line.to_string(),
                ]);
            }
            write!(out, "{}", table.render())?;
            if usage.occupancy.len() > opts.limit {
                writeln!(
                    out,
                    "… {} more (--limit)",
                    usage.occupancy.len() - opts.limit
                )?;
            }
        }
        if !usage.holders.is_empty() {
            writeln!(out, "\nper request")?;
            let mut table = Table::new(&[
                ("request", Align::Left),
                ("reserved", Align::Right),
                ("committed", Align::Right),
                ("released", Align::Right),
                ("rolled back", Align::Right),
                ("held at end", Align::Right),
                ("deferred", Align::Right),
                ("rejected", Align::Right),
            ]);
            for h in usage.holders.iter().take(opts.limit) {
                table.row(vec![
                    h.holder.clone(),
                    h.reserved.to_string(),
                    h.committed.to_string(),
                    h.released.to_string(),
                    h.rolled_back.to_string(),
                    h.held.to_string(),
                    h.deferrals.to_string(),
                    h.rejections.to_string(),
                ]);
            }
            write!(out, "{}", table.render())?;
        }
        if !usage.reasons.is_empty() {
            writeln!(out, "\nreasons")?;
            for r in &usage.reasons {
                writeln!(out, "  {} × {}: {}", r.count, r.action, r.reason)?;
            }
        }
        for u in &usage.underflows {
            writeln!(
                out,
                "UNDERFLOW line {}: {} went {} below 0 ({})",
                u.line, u.holder, u.amount, u.kind
            )?;
        }
        for l in &usage.leaks {
            writeln!(out, "NEVER RELEASED: {} still holds {}", l.holder, l.held)?;
        }
        writeln!(out)?;
    }
    if all.unreadable > 0 {
        writeln!(
            out,
            "{} resource event(s) without a kind or a known action",
            all.unreadable
        )?;
    }
    Ok(())
}

pub(super) fn latency(
    doc: &ProfileDocument,
    opts: &Options,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let requests = doc.requests();
    let ttft: Vec<u64> = requests.iter().filter_map(|r| r.ttft_us).collect();
    let itl: Vec<u64> = requests
        .iter()
        .flat_map(|r| r.itl_nanos.iter().copied())
        .collect();
    let stats = doc.latency();
    let settings = doc.settings();
    if opts.json {
        return write_json(
            out,
            &json!({
                (attribute::TTFT_US): stats.ttft_us,
                (attribute::ITL_NANOS): stats.itl_nanos,
                "ttft_histogram": Histogram::of(&ttft),
                "itl_histogram": Histogram::of(&itl),
                "detail_level": settings.detail_level,
                "sample_rate": settings.sample_rate,
                "failures": doc.failures().len(),
                "diagnostic_only": doc.diagnostic_only().len(),
            }),
        );
    }
    writeln!(
        out,
        "detail level {}, sample rate {}",
        settings.detail_level.as_deref().unwrap_or("not stated"),
        settings
            .sample_rate
            .map_or(String::from("not stated"), |r| r.to_string())
    )?;
    let mut table = Table::new(&[
        ("metric", Align::Left),
        ("count", Align::Right),
        ("p50", Align::Right),
        ("p90", Align::Right),
        ("p99", Align::Right),
        ("max", Align::Right),
    ]);
    for (name, p, scale) in [
        ("TTFT", stats.ttft_us, 1_000u64),
        ("ITL", stats.itl_nanos, 1),
    ] {
        if let Some(p) = p {
            let f = |v: u64| format_ns(v.saturating_mul(scale));
            table.row(vec![
                name.into(),
                p.count.to_string(),
                f(p.p50),
                f(p.p90),
                f(p.p99),
                f(p.max),
            ]);
        }
    }
    if table.is_empty() {
        writeln!(out, "(no token timing)")?;
    } else {
        write!(out, "{}", table.render())?;
    }
    Ok(())
}
