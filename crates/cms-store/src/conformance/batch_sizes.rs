//! The sizes of the batches the store commits, as its [`crate::BATCH_SIZE`]
//! histogram records them, for the cases that show group commit.

use std::sync::{Arc, Mutex};

use metrics::{Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit};

/// A recorder that keeps each value of [`crate::BATCH_SIZE`] and drops
/// every other metric. Set it with [`metrics::set_default_local_recorder`]:
/// it sees what is recorded on this thread, which is every batch of a store
/// opened on a current-thread runtime.
#[derive(Default)]
pub(crate) struct BatchSizes(Arc<Sizes>);

#[derive(Default)]
struct Sizes(Mutex<Vec<f64>>);

impl HistogramFn for Sizes {
    fn record(&self, value: f64) {
        self.0.lock().expect("sizes").push(value);
    }
}

impl BatchSizes {
    /// The entries of each batch committed so far, in order.
    pub(crate) fn seen(&self) -> Vec<f64> {
        self.0.0.lock().expect("sizes").clone()
    }
}

impl Recorder for BatchSizes {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, _: &Key, _: &Metadata<'_>) -> Counter {
        Counter::noop()
    }

    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        if key.name() == crate::BATCH_SIZE { Histogram::from_arc(self.0.clone()) } else { Histogram::noop() }
    }
}
