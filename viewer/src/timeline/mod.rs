//! The flame chart's math, free of any browser API so native tests check it: the visible
//! window ([`viewport`]), lanes ([`lanes`]), level of detail ([`lod`]), the time axis
//! ([`ticks`]), the minimap ([`minimap`]), search ([`search`]) and colours ([`palette`]).
//! `components::timeline` only paints what these return.

pub mod groups;
pub mod lanes;
pub mod lod;
pub mod memory_curve;
pub mod minimap;
pub mod palette;
pub mod search;
pub mod ticks;
pub mod viewport;
