local lib = import 'lib/jobs.libsonnet';
[lib.shard('a')]
