//! The node API as Talos itself defines it: messages and the
//! `MachineService` server generated (by `build.rs`) from `proto-upstream/`,
//! an unmodified copy of Talos's `.proto` files. The fake serves these, not
//! the client's trimmed copy in `cms-nodeapi`, so that a client whose copy
//! drifted from Talos's fails against the fake as it would against a node.
//! The calls the fake does not implement answer `Unimplemented`.

#![allow(clippy::all, clippy::pedantic, missing_debug_implementations, unreachable_pub, missing_docs)]
// Upstream's comments are protobuf prose, not rustdoc: their `[a][b]` links
// and bare URLs are kept as Talos wrote them.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::bare_urls, rustdoc::invalid_html_tags)]

/// Talos's `common` package.
pub mod common {
    tonic::include_proto!("common");
}

/// Talos's `machine` package: `MachineService`.
pub mod machine {
    tonic::include_proto!("machine");
}

/// `google.rpc.Status`, as Talos vendors it.
pub mod google {
    /// The `google.rpc` package.
    pub mod rpc {
        tonic::include_proto!("google.rpc");
    }
}
