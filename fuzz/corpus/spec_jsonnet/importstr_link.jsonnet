{ name: 'x', user: 'bob', command: [importstr 'link.txt', importstr 'data.txt'], resources: { cpu: '1', memory: '1Mi' } }
