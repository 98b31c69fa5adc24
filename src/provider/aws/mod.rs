//! AWS: EC2 and Auto Scaling through their Query APIs (work in progress).
