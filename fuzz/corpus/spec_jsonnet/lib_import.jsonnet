local jobs = import 'lib/jobs.libsonnet';
[jobs.shard('s%d' % i, i + 1) for i in std.range(0, 2)]
