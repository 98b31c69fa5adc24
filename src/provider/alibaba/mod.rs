//! Alibaba Cloud: ECS and Auto Scaling (ESS) through the RPC-style API (work in progress).
