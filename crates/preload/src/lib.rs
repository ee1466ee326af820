//! libpcstream.so: the LD_PRELOAD shim.
