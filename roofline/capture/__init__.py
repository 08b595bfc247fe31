"""The only GPU side: run ``ncu`` with the metrics the roofline needs, probe the machine, measure bandwidth."""
