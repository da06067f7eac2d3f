//! `cms-nodeapi`'s integration tests: the drift guard, which holds our
//! trimmed `.proto` files to Talos's own.

mod drift;
mod guard;
