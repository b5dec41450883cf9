//! Access logs read at disk speed for `horde profile`: a log's lines (plain or gzip, in bounded
//! memory: [`read`]), the combined and nginx formats ([`text`]), JSON lines ([`json`]), endpoint templates
//! ([`template`]) and the aggregate a profile is built from ([`profile`]): per endpoint, per
//! minute and per session, with no object per line. The Python package (`horde.profile`)
//! decides the format, orchestrates, and turns the aggregate into the profile and the plan.

pub mod json;
mod mt;
pub mod profile;
pub mod read;
pub mod template;
pub mod text;
