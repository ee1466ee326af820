//! ftl-sim: a page-mapped SSD model with external and internal (GC) streams,
//! used to measure the write amplification of placement policies.
