//! The end-to-end suite: each module checks one part of the contract at its boundaries.

mod actions;
mod assist;
mod binary;
mod boundary;
mod connector;
mod connector_auth;
mod connector_cli;
mod connector_computer;
mod connector_control;
mod connector_files;
mod connector_llm;
mod connector_shell;
mod contracts;
mod desktop;
mod desktop_client;
mod guidance;
mod launcher;
mod llm_client;
mod model_provider;
mod openapi;
mod privacy;
mod real_model;
mod support;
mod tidy;
