local lib = import 'lib/jobs.libsonnet';
{
  jobs: [lib.shard('a', 1)
}
