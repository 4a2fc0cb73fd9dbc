local lib = import 'lib/jobs.libsonnet';
[
  lib.shard('ok', 2),
  lib.shard('bad', 2, memory='64Mb') + { comand: 'x' },
]
