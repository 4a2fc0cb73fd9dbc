local lib = import 'lib/jobs.libsonnet';
{
  jobs: [
    lib.shard('index-%d' % i, shards=4 * i) for i in [1, 2]
  ] + [lib.shard('merge', 1, memory='1Gi') + { priority: 'mid' }],
}
