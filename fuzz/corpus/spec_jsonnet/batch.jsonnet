// A map-reduce style pipeline built with a Jsonnet function: one mapper job
// per input, each sized by its input, and a reducer that collects them.
//
//   herd submit examples/batch.jsonnet
local user = 'bob';

// One batch job; fields given in `extra` are merged over the defaults.
local batchJob(name, tasks, cpu='100m', memory='64Mi', extra={}) = {
  name: name,
  user: user,
  priority: 'batch',
  tasks: tasks,
  // Stands in for a real pipeline binary: works for a moment, then finishes.
  command: ['/bin/sh', '-c', 'echo "' + name + ' shard $0 of $1"; sleep 2', '${task.index}', '${task.count}'],
  resources: { cpu: cpu, memory: memory },
  restart: { policy: 'on-failure', max_restarts: 3 },
  grace_period: '5s',
  labels: { pipeline: 'nightly' },
} + extra;

local inputs = [
  { name: 'clicks', shards: 6, memory: '128Mi' },
  { name: 'views', shards: 3, memory: '64Mi' },
];

{
  jobs: [
    batchJob('map-' + input.name, input.shards, memory=input.memory)
    for input in inputs
  ] + [
    batchJob('reduce', 1, cpu='200m', memory='256Mi', extra={
      priority: 'mid',
      soft_constraints: ['ssd exists'],
    }),
  ],
}
