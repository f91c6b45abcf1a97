// The extension's unit tests: the parts that do not need VS Code (bundled into one file and run
// by mocha in Node; the parts that need the editor are tested in a real one, test/suite).
import './model.test';
import './uris.test';
import './locate.test';
import './branchName.test';
import './mcpServers.test';
import './notices.test';
