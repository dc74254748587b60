//! The flame chart's math, free of any browser API so native tests check it: the visible
//! window ([`viewport`]), lanes ([`lanes`]), lane groups on one axis ([`layout`]), level of
//! detail ([`lod`]), the display list and hit testing ([`scene`]), keys, wheel and drags
//! ([`input`]), the time axis ([`ticks`]), the minimap ([`minimap`]), search ([`search`]),
//! the memory strip ([`memory_curve`]), colours ([`palette`]), the URL fragment
//! ([`fragment`]) and the pixels of the rectangles ([`raster`]). `components::timeline` only
//! paints what these return.

pub mod fragment;
pub mod input;
pub mod lanes;
pub mod layout;
pub mod lod;
pub mod memory_curve;
pub mod minimap;
pub mod palette;
pub mod pointer;
pub mod raster;
pub mod scene;
pub mod search;
pub mod settle;
pub mod ticks;
pub mod viewport;
