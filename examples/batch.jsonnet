// A map-reduce style pipeline built with a Jsonnet function: one mapper job
// per input, each sized by its input, and a reducer that collects them.
//
//   herd submit examples/batch.jsonnet
local user = 'bob';

// One batch job; fields given in `extra` are merged over the defaults.
local batchJob(name, tasks, cpu='500m', memory='512Mi', extra={}) = {
  name: name,
  user: user,
  priority: 'batch',
  tasks: tasks,
  command: ['/opt/pipeline/bin/' + name],
  args: ['--shard=${task.index}', '--shards=${task.count}'],
  resources: { cpu: cpu, memory: memory },
  restart: { policy: 'on-failure', max_restarts: 3 },
  grace_period: '5s',
  labels: { pipeline: 'nightly' },
} + extra;

local inputs = [
  { name: 'clicks', shards: 16, memory: '1Gi' },
  { name: 'views', shards: 8, memory: '512Mi' },
];

{
  jobs: [
    batchJob('map-' + input.name, input.shards, memory=input.memory)
    for input in inputs
  ] + [
    batchJob('reduce', 1, cpu=2, memory='4Gi', extra={
      priority: 'mid',
      constraints: ['ssd exists'],
    }),
  ],
}
