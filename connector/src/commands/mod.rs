//! Subcommands besides `start`: audit, doctor, status, install and uninstall.

pub mod audit;
pub mod doctor;
pub mod service;
pub mod status;
