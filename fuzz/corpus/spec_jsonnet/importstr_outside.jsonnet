{ name: 'x', user: 'bob', command: [importstr '../secret.txt'], resources: { cpu: '1', memory: '1Mi' } }
