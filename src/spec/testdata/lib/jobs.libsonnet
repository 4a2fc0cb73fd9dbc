// Builds a batch job; used by ../jobs.jsonnet to test imports.
{
  shard(name, shards, memory='256Mi'):: {
    name: name,
    user: 'bob',
    priority: 'batch',
    tasks: shards,
    command: ['/usr/bin/worker', '--shard=${task.index}', '--of=' + shards],
    resources: { cpu: 0.5, memory: memory },
    restart: 'never',
  },
}
