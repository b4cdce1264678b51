#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| natsprobe::fuzz::netlink(data));
