// Package canonjsontest holds documents that the tests of canonjson and
// of its users (keying's fingerprints) share, so that both sweep the same
// bodies around canonjson's fast paths. Only tests import it.
package canonjsontest

// Volatile is the set of paths the tests drop: top-level, nested, in
// array elements and in a top-level array.
var Volatile = []string{"traceId", "order.nonce", "order.items[].timestamp", "[].nonce", "list[][].nonce"}

// FlatNearMisses are bodies close to the flat objects AppendFlat
// handles, each with one thing it must leave to the parser: whitespace,
// escapes, nesting, numbers not written canonically, repeated names,
// syntax errors, trailing data.
var FlatNearMisses = []string{
	`{ "sku":"book-42","qty":1}`, `{"sku" :"book-42","qty":1}`, `{"sku": "book-42","qty":1}`,
	`{"sku":"book-42" ,"qty":1}`, `{"sku":"book-42", "qty":1}`, `{"sku":"book-42","qty":1 }`,
	` {"sku":"book-42","qty":1}`, `{"sku":"book-42","qty":1} `, "{\"sku\":\"book-42\",\"qty\":1}\n",
	`{"s\u006bu":"book-42","qty":1}`, `{"sku":"book\u002d42","qty":1}`, `{"sku":"bo\"ok","qty":1}`,
	`{"sku":"book-42","qty":{"n":1}}`, `{"sku":"book-42","qty":[1]}`, `{"sku":"book-42","qty":[]}`, `{"a":{}}`,
	`{"qty":1.0,"sku":"x"}`, `{"qty":1e2,"sku":"x"}`, `{"qty":1E2}`, `{"qty":-0,"sku":"x"}`, `{"qty":-0}`,
	`{"qty":01}`, `{"qty":-}`, `{"qty":1.}`, `{"qty":10.50}`, `{"qty":12345678901234567890123456789012345678901}`,
	`{"sku":"x","sku":"y"}`, `{"b":1,"a":2,"b":3}`, `{"a":1,"a":1}`, `{"":1,"":2}`, `{"b":1,"a":2,"a":3}`,
	`{"sku":"x",}`, `{,"sku":"x"}`, `{"sku":"x""qty":1}`, `{"sku":"x";"qty":1}`, `{"sku""x"}`, `{"sku":}`,
	`{"sku":"x"}}`, `{"sku":"x"}{}`, `{"sku":"x"`, `{"sku":"x`, `{"sku`, `{"`, `{`, `}`, `{}}`, `{"a":1}x`,
	`{"a":tru}`, `{"a":trueX}`, `{"a":nul}`, `{"a":1x}`, `{"a":"b"c}`, `{a:1}`, `{'a':1}`,
	"{\"a\":\"\xff\"}", "{\"\xc3\":1}", "{\"a\":\"x\x01\"}", "{\"\t\":1}", `{"é":1,"\u00e9":2}`,
	"{\"a\":\"xyz\x01,\"b\":1}", "{\"a\":\"xyz\xff,\"b\":1}", `{"a":"xyz\,"b":1}`, "{\"a\x01:1,\"b\":1}",
	"{\"a\xff:1,\"b\":1}", `{"a\:1,"b":1}`, "{\"abcdefghij\x01:1,\"b\":1}", "{\"x\":1,\"a\x01\":1}",
	`{"ab}`, `{"abcdefghij}`, `{"a":"b}`, `{"a":"bcdefghijk}`, `{"a":1,"b}`, `{"a":1,"b":"c}`, `{"a":"}`, `{"}`,
	`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17}`,
	`{"q":1,"p":2,"o":3,"n":4,"m":5,"l":6,"k":7,"j":8,"i":9,"h":10,"g":11,"f":12,"e":13,"d":14,"c":15,"b":16,"a":17}`,
	`[{"b":1,"a":2}]`, `"{\"b\":1}"`, `{}  `, `{ }`,
}

// FlatHits are bodies AppendFlat handles itself.
var FlatHits = []string{
	`{}`, `{"sku":"book-42","qty":1}`, `{"qty":1,"sku":"book-42"}`, `{"a":1}`, `{"":1}`, `{"":1,"a":2}`,
	`{"a":1,"":2}`, `{" ":1,"":2}`, `{"!":1,"":2,"#":3}`, `{"a":1,"ab":2}`, `{"ab":1,"a":2}`,
	`{"sku":"A-1","qty":1,"amount":1000,"currency":"EUR"}`, `{"t":true,"f":false,"n":null,"s":"","i":-15,"z":0}`,
	`{"z":0,"i":-15,"s":"","n":null,"f":false,"t":true}`, `{"é":1,"z":2}`, `{"z":1,"é":2,"日本":"語"}`,
	`{"traceId":"x","a":1}`, `{"b":1,"traceId":2,"a":3}`, `{"traceId":1}`, `{"nonce":1,"order":2}`,
	`{"prefix-longer-than-16-b":1,"prefix-longer-than-16-a":2}`, `{"prefix-longer-than-16-a":1,"prefix-longer-than-16-ab":2}`,
	`{"prefix-longer-than-16-ab":1,"prefix-longer-than-16-a":2}`, `{"abcdefgh":1,"abcdefg":2,"abcdefghi":3}`,
	`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16}`,
	`{"p":1,"o":2,"n":3,"m":4,"l":5,"k":6,"j":7,"i":8,"h":9,"g":10,"f":11,"e":12,"d":13,"c":14,"b":15,"a":16}`,
	`{"v":"a string of more than eight bytes","w":1234567890123456789012345678901234567890}`,
}
