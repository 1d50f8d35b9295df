//! Hardware listing for HELLO: serial ports, USB devices and GPIO chips.
